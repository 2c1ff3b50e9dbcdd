//! The progress display's tests: every form over one run of events, the live status
//! area through a tiny terminal, the ticker, odd input, interrupts. The escape handling
//! is tested in `escapes.rs`, the JSON objects in `json.rs` and here (`json`).

use std::collections::BTreeMap;

use super::logs::MAX_LOG_LINE;
use super::status::elapsed;
use super::*;

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

fn p(s: &str) -> StorePath {
    StorePath::from_absolute(s).unwrap()
}

const A: &str = "/rocmx/store/00000000000000000000000000000000-hello.drv";
const B: &str = "/rocmx/store/11111111111111111111111111111111-world.drv";
const C: &str = "/rocmx/store/22222222222222222222222222222222-dep.drv";
const D: &str = "/rocmx/store/33333333333333333333333333333333-top.drv";
const A_OUT: &str = "/rocmx/store/44444444444444444444444444444444-hello";
const C_OUT: &str = "/rocmx/store/55555555555555555555555555555555-dep";

fn outs(path: &str) -> BTreeMap<String, StorePath> {
    BTreeMap::from([("out".to_string(), p(path))])
}

/// A run: one cached, one built (with logs and a phase), one failed, one skipped.
fn events() -> Vec<Event> {
    vec![
        Event::Planned {
            drvs: vec![p(C), p(A), p(B), p(D)],
        },
        Event::Cached {
            drv: p(C),
            outputs: outs(C_OUT),
        },
        Event::Started {
            drv: p(A),
            name: "hello".into(),
        },
        Event::Log {
            drv: p(A),
            data: b"line one\nline ".to_vec(),
        },
        Event::Log {
            drv: p(A),
            data: b"two\r\n@nix {\"action\":\"setPhase\",\"phase\":\"buildPhase\"}\n".to_vec(),
        },
        Event::Phase {
            drv: p(A),
            phase: "buildPhase".into(),
        },
        Event::Log {
            drv: p(A),
            data: b"no newline \xff".to_vec(),
        },
        Event::Built {
            drv: p(A),
            outputs: outs(A_OUT),
            duration: Duration::from_millis(1234),
        },
        Event::Started {
            drv: p(B),
            name: "world".into(),
        },
        Event::Log {
            drv: p(B),
            data: b"oops\n".to_vec(),
        },
        Event::Failed {
            drv: p(B),
            message: format!("builder for '{B}' failed with exit code 1\nlast log lines:\noops"),
        },
        Event::Skipped {
            drv: p(D),
            because: p(B),
        },
    ]
}

fn run(format: LogFormat, logs: bool, tty: bool) -> Buf {
    let buf = Buf::default();
    let pr = Progress::with_options(
        format,
        logs,
        Box::new(buf.clone()),
        tty,
        Width::Fixed(80),
        false,
    );
    for e in events() {
        pr.event(&e);
    }
    pr.finish();
    buf
}

#[test]
fn plain_with_logs() {
    let buf = run(LogFormat::Plain, true, true);
    let expected = format!(
        "building '{A}'...\n\
         hello> line one\n\
         hello> line two\n\
         hello> Running phase: buildPhase\n\
         hello> no newline \u{fffd}\n\
         built hello (1.2s)\n\
         building '{B}'...\n\
         world> oops\n\
         builder for '{B}' failed with exit code 1\n\
         last log lines:\n\
         oops\n\
         skipped top: depends on failed world\n"
    );
    // The non-UTF-8 byte is written as is.
    assert_eq!(buf.text(), expected);
    assert!(buf.bytes().windows(2).any(|w| w == b" \xff"));
    assert!(!buf.bytes().contains(&0x1b));
}

#[test]
fn bar_without_tty_is_plain_without_logs() {
    let buf = run(LogFormat::Bar, false, false);
    let expected = format!(
        "building '{A}'...\n\
         built hello (1.2s)\n\
         building '{B}'...\n\
         builder for '{B}' failed with exit code 1\n\
         last log lines:\n\
         oops\n\
         skipped top: depends on failed world\n"
    );
    assert_eq!(buf.text(), expected);
}

#[test]
fn json() {
    // -L or not, the same.
    for logs in [false, true] {
        let buf = run(LogFormat::Json, logs, false);
        let expected = [
            format!(r#"{{"action":"planned","drvs":["{C}","{A}","{B}","{D}"]}}"#),
            format!(r#"{{"action":"cached","drv":"{C}","outputs":{{"out":"{C_OUT}"}}}}"#),
            format!(r#"{{"action":"start","drv":"{A}","name":"hello"}}"#),
            format!(r#"{{"action":"log","drv":"{A}","line":"line one"}}"#),
            format!(r#"{{"action":"log","drv":"{A}","line":"line two"}}"#),
            format!(
                r#"{{"action":"log","drv":"{A}","line":"@nix {{\"action\":\"setPhase\",\"phase\":\"buildPhase\"}}"}}"#
            ),
            format!(r#"{{"action":"phase","drv":"{A}","phase":"buildPhase"}}"#),
            format!(r#"{{"action":"log","drv":"{A}","line":"no newline �"}}"#),
            format!(
                r#"{{"action":"built","drv":"{A}","outputs":{{"out":"{A_OUT}"}},"duration_ms":1234}}"#
            ),
            format!(r#"{{"action":"start","drv":"{B}","name":"world"}}"#),
            format!(r#"{{"action":"log","drv":"{B}","line":"oops"}}"#),
            format!(
                r#"{{"action":"failed","drv":"{B}","message":"builder for '{B}' failed with exit code 1\nlast log lines:\noops"}}"#
            ),
            format!(r#"{{"action":"skipped","drv":"{D}","because":"{B}"}}"#),
        ];
        let text = buf.text();
        assert_eq!(text, expected.join("\n") + "\n");
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["action"].is_string());
        }
    }
}

/// A tiny terminal: enough of VT100 for what the display writes.
fn screen(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                row += 1;
                col = 0;
                if lines.len() <= row {
                    lines.push(Vec::new());
                }
            }
            '\r' => col = 0,
            '\x1b' => {
                assert_eq!(chars.next(), Some('['));
                let mut params = String::new();
                let fin = loop {
                    let c = chars.next().expect("unterminated escape");
                    if c.is_ascii_digit() || c == ';' {
                        params.push(c);
                    } else {
                        break c;
                    }
                };
                match fin {
                    'A' => {
                        let n: usize = params.parse().unwrap();
                        assert!(n >= 1 && n <= row, "cursor up {n} from row {row}");
                        row -= n;
                    }
                    'K' => {
                        assert_eq!(params, "2");
                        lines[row].clear();
                    }
                    'J' => {
                        assert_eq!(params, "");
                        lines[row].truncate(col);
                        lines.truncate(row + 1);
                    }
                    'm' => {}
                    other => panic!("unexpected escape {other}"),
                }
            }
            c => {
                let line = &mut lines[row];
                while line.len() < col {
                    line.push(' ');
                }
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    let mut out: Vec<String> = lines.into_iter().map(|l| l.into_iter().collect()).collect();
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out
}

fn live(logs: bool, width: usize) -> (Progress, Buf) {
    let buf = Buf::default();
    let pr = Progress::with_options(
        LogFormat::Bar,
        logs,
        Box::new(buf.clone()),
        true,
        Width::Fixed(width),
        false,
    );
    (pr, buf)
}

#[test]
fn fetches_show_paths_and_bytes() {
    let (pr, buf) = live(false, 100);
    let (a, b) = (p(A), p(B));
    pr.event(&Event::Fetching {
        paths: vec![a.clone(), b.clone()],
        download: 3 << 20,
        unpacked: 8 << 20,
    });
    pr.event(&Event::Downloaded {
        path: a.clone(),
        bytes: 1 << 20,
    });
    let s = screen(&buf.bytes());
    assert_eq!(
        s,
        [
            "fetching 2 paths (3.00 MiB download, 8.00 MiB unpacked)",
            "[done 0/0, running 0, queued 0, failed 0, fetched 0/2 paths 1.00 MiB/3.00 MiB]",
        ]
    );
    pr.event(&Event::Fetched {
        path: a.clone(),
        source: "file:///c".into(),
        bytes: 1 << 20,
    });
    pr.event(&Event::Fetched {
        path: b.clone(),
        source: "file:///c".into(),
        bytes: 2 << 20,
    });
    pr.finish();
    let s = screen(&buf.bytes());
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!(s[1], format!("fetched {} (1.00 MiB)", a.name()));

    // Plain and JSON forms.
    for (format, want) in [
        (
            LogFormat::Plain,
            format!("fetched {a} from file:///c (1.00 MiB)"),
        ),
        (
            LogFormat::Json,
            format!(
                r#"{{"action":"fetched","path":"{}","source":"file:///c","bytes":1048576}}"#,
                a.to_absolute()
            ),
        ),
    ] {
        let buf = Buf::default();
        let pr = Progress::new(format, false, Box::new(buf.clone()), false);
        pr.event(&Event::Fetched {
            path: a.clone(),
            source: "file:///c".into(),
            bytes: 1 << 20,
        });
        pr.finish();
        let text = String::from_utf8(buf.bytes()).unwrap();
        assert!(text.contains(&want), "{text}");
    }
}

#[test]
fn bar_live() {
    let (pr, buf) = live(true, 80);
    let ev = events();
    for e in &ev[..6] {
        pr.event(e);
    }
    let s = screen(&buf.bytes());
    assert_eq!(
        s,
        [
            "hello> line one",
            "hello> line two",
            "hello> Running phase: buildPhase",
            "[done 1/4, running 1, queued 2, failed 0]",
            "  building hello (buildPhase) 0s",
        ]
    );
    for e in &ev[6..] {
        pr.event(e);
    }
    let s = screen(&buf.bytes());
    assert_eq!(
        s.last().unwrap(),
        "[done 2/4, running 0, queued 0, failed 1, skipped 1]"
    );
    pr.finish();
    let s = screen(&buf.bytes());
    assert_eq!(
        s,
        [
            "hello> line one",
            "hello> line two",
            "hello> Running phase: buildPhase",
            "hello> no newline \u{fffd}",
            "built hello in 1.2s",
            "world> oops",
            &format!("builder for '{B}' failed with exit code 1"),
            "last log lines:",
            "oops",
            "skipped top: depends on failed world",
        ]
    );
    // After finish: permanent lines only, the area stays away.
    let len = buf.bytes().len();
    pr.finish();
    pr.event(&Event::Started {
        drv: p(A),
        name: "hello".into(),
    });
    assert_eq!(buf.bytes().len(), len);
}

#[test]
fn bar_live_without_logs_many_running_narrow() {
    let (pr, buf) = live(false, 30);
    let drvs: Vec<StorePath> = (0..10u8)
        .map(|i| StorePath::new([i; 20], &format!("package-with-a-long-name-{i}.drv")).unwrap())
        .collect();
    pr.event(&Event::Planned { drvs: drvs.clone() });
    assert_eq!(screen(&buf.bytes()), ["[done 0/10, running 0, queued"]);
    for (i, d) in drvs.iter().enumerate() {
        pr.event(&Event::Started {
            drv: d.clone(),
            name: format!("p{i}"),
        });
        pr.event(&Event::Log {
            drv: d.clone(),
            data: b"not shown\n".to_vec(),
        });
    }
    pr.event(&Event::Phase {
        drv: drvs[1].clone(),
        phase: "install\x1b[2JPhase".into(),
    });
    let s = screen(&buf.bytes());
    assert_eq!(s.len(), 10);
    assert_eq!(s[0], "[done 0/10, running 10, queue");
    assert_eq!(s[1], "  building p0 0s");
    assert_eq!(s[2], "  building p1 (install?[2JPha");
    assert_eq!(s[9], "  … and 2 more");
    pr.event(&Event::Failed {
        drv: drvs[0].clone(),
        message: "error: \x1b[31mred\x1b[0m \x1b[Hcursor\x07".into(),
    });
    let s = screen(&buf.bytes());
    assert_eq!(s[0], "error: red cursor");
    assert!(buf.text().contains("\x1b[31mred"));
    assert_eq!(s[1], "[done 0/10, running 9, queued");
    drop(pr);
    assert_eq!(screen(&buf.bytes()), ["error: red cursor"]);
}

#[test]
fn ticker_redraws_and_stops() {
    let buf = Buf::default();
    let pr = Progress::with_options(
        LogFormat::Bar,
        false,
        Box::new(buf.clone()),
        true,
        Width::Fixed(80),
        true,
    );
    pr.event(&Event::Started {
        drv: p(A),
        name: "hello".into(),
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while !buf.text().contains("building hello") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        screen(&buf.bytes()),
        [
            "[done 0/1, running 1, queued 0, failed 0]",
            "  building hello 0s"
        ]
    );
    pr.finish();
    assert!(screen(&buf.bytes()).is_empty());
    let len = buf.bytes().len();
    std::thread::sleep(3 * TICK);
    assert_eq!(buf.bytes().len(), len);
}

#[test]
fn odd_input_does_not_panic() {
    for format in [LogFormat::Bar, LogFormat::Plain, LogFormat::Json] {
        for tty in [false, true] {
            let buf = Buf::default();
            let pr = Progress::with_options(
                format,
                true,
                Box::new(buf.clone()),
                tty,
                Width::Fixed(0),
                false,
            );
            // Events about derivations never planned nor started, twice over.
            for _ in 0..2 {
                pr.event(&Event::Log {
                    drv: p(B),
                    data: vec![0xff; MAX_LOG_LINE * 2 + 3],
                });
                pr.event(&Event::Phase {
                    drv: p(C),
                    phase: "\u{1F600}".into(),
                });
                pr.event(&Event::Built {
                    drv: p(C),
                    outputs: BTreeMap::new(),
                    duration: Duration::ZERO,
                });
                pr.event(&Event::Failed {
                    drv: p(C),
                    message: String::new(),
                });
                pr.event(&Event::Skipped {
                    drv: p(D),
                    because: p(A),
                });
                pr.event(&Event::Cached {
                    drv: p(D),
                    outputs: BTreeMap::new(),
                });
            }
            pr.finish();
            let text = buf.text();
            if format == LogFormat::Plain || (format == LogFormat::Bar && !tty) {
                // Pieces of 64 KiB as they fill, the rest at finish; named after
                // the drv path.
                assert_eq!(text.matches("world> ").count(), 5);
                assert!(text.contains("skipped top: depends on failed hello\n"));
            }
        }
    }
}

#[test]
fn waiting_for_lock_in_every_form() {
    let evs = [
        Event::Planned {
            drvs: vec![p(A), p(B)],
        },
        Event::WaitingForLock {
            drv: p(A),
            name: "hello".into(),
        },
        Event::Cached {
            drv: p(A),
            outputs: outs(A_OUT),
        },
    ];
    let run = |format, tty| {
        let buf = Buf::default();
        let pr = Progress::with_options(
            format,
            false,
            Box::new(buf.clone()),
            tty,
            Width::Fixed(80),
            false,
        );
        (pr, buf)
    };
    let (pr, buf) = run(LogFormat::Plain, false);
    evs.iter().for_each(|e| pr.event(e));
    pr.finish();
    assert_eq!(buf.text(), format!("waiting for lock on '{A}'...\n"));

    let (pr, buf) = run(LogFormat::Json, false);
    evs.iter().for_each(|e| pr.event(e));
    pr.finish();
    let text = buf.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1],
        format!(r#"{{"action":"waiting","drv":"{A}","name":"hello"}}"#)
    );
    assert!(lines[2].starts_with(r#"{"action":"cached""#));

    let (pr, buf) = run(LogFormat::Bar, true);
    evs[..2].iter().for_each(|e| pr.event(e));
    assert_eq!(
        screen(&buf.bytes()),
        [
            "[done 0/2, running 0, queued 1, failed 0, waiting 1]",
            "  waiting for lock on hello 0s",
        ]
    );
    pr.event(&evs[2]);
    assert_eq!(
        screen(&buf.bytes()),
        ["[done 1/2, running 0, queued 1, failed 0]"]
    );
    pr.finish();
}

#[test]
fn elapsed_times() {
    assert_eq!(elapsed(Duration::from_secs(12)), "12s");
    assert_eq!(elapsed(Duration::from_secs(185)), "3m05s");
    assert_eq!(elapsed(Duration::from_secs(7620)), "2h07m");
}

#[test]
fn colours_of_a_failure_reach_neither_a_pipe_nor_a_no_color_terminal() {
    let failed = Event::Failed {
        drv: p(A),
        message: "builder failed\n\x1b[31mred\x1b[0m line".into(),
    };
    // Plain (a pipe): no escape at all.
    let buf = Buf::default();
    let pr = Progress::with_options(
        LogFormat::Plain,
        false,
        Box::new(buf.clone()),
        false,
        Width::Fixed(80),
        false,
    );
    pr.event(&failed);
    pr.finish();
    assert_eq!(buf.text(), "builder failed\nred line\n");
    // Live with colour: kept; live with NO_COLOR: dropped.
    for (colour, want) in [(true, "\x1b[31mred\x1b[0m line"), (false, "red line")] {
        let buf = Buf::default();
        let pr = Progress::with_colour(
            LogFormat::Bar,
            false,
            Box::new(buf.clone()),
            true,
            Width::Fixed(80),
            false,
            colour,
        );
        pr.event(&failed);
        pr.finish();
        let text = buf.text();
        assert!(text.contains(want), "{colour}: {text:?}");
        if !colour {
            assert!(!text.contains("\x1b[31m"), "{text:?}");
        }
    }
}

#[test]
fn an_interrupt_erases_the_status_area_and_stops_drawing() {
    let (pr, buf) = live(false, 80);
    pr.event(&Event::Started {
        drv: p(A),
        name: "hello".into(),
    });
    let before = buf.bytes().len();
    assert!(before > 0, "the status area was drawn");
    pr.shared.interrupt();
    let after = buf.bytes();
    assert!(
        after[before..].starts_with(b"\x1b["),
        "{:?}",
        String::from_utf8_lossy(&after)
    );
    assert!(after.ends_with(b"A\r\x1b[J"));
    // Nothing is drawn any more.
    pr.event(&Event::Started {
        drv: p(B),
        name: "two".into(),
    });
    pr.finish();
    assert_eq!(buf.bytes().len(), after.len());
}
