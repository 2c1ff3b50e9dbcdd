//! The status pipe between the sandbox processes and the parent.
//!
//! The processes inside write small binary records, one `write(2)` each (they are
//! shorter than `PIPE_BUF`, so they never interleave). A record is
//! `[tag u8][step u8][value i32 LE][len u16 LE][len bytes of message]`.
//! Building one needs no allocation: the child side formats into a stack buffer.

/// A setup step failed; `value` is the errno, the message says what was being done.
pub(super) const TAG_ERROR: u8 = b'E';
/// The builder exited; `value` is its exit code.
pub(super) const TAG_EXIT: u8 = b'X';
/// The builder was killed by a signal; `value` is the signal number.
pub(super) const TAG_SIGNAL: u8 = b'S';
/// The build reached its process limit and init killed it; `value` is the number of
/// processes init counted.
pub(super) const TAG_NPROC: u8 = b'P';

/// Which part of the setup a `TAG_ERROR` record is about. The parent uses it to tell a
/// refused user namespace from an ordinary setup failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    /// Entering the new namespaces: `clone(CLONE_NEWUSER | ...)` (or `unshare`).
    Unshare = 1,
    /// Writing `/proc/<pid>/{setgroups,uid_map,gid_map}`.
    IdMaps = 2,
    /// The first mount in the new mount namespace (making `/` private).
    MountPrivate = 3,
    /// Any other mount, mount point or generated file.
    Mount = 4,
    /// Mounting the fresh `/proc`.
    MountProc = 5,
    /// `pivot_root` and detaching the old root.
    PivotRoot = 6,
    /// Hostname, loopback interface, capabilities, `NO_NEW_PRIVS`.
    Identity = 7,
    /// `fork`.
    Fork = 8,
    /// `execve` of the builder.
    Exec = 9,
}

impl Step {
    fn from_u8(v: u8) -> Option<Step> {
        Some(match v {
            1 => Step::Unshare,
            2 => Step::IdMaps,
            3 => Step::MountPrivate,
            4 => Step::Mount,
            5 => Step::MountProc,
            6 => Step::PivotRoot,
            7 => Step::Identity,
            8 => Step::Fork,
            9 => Step::Exec,
            _ => return None,
        })
    }
}

const HEADER: usize = 8;
const CAPACITY: usize = 1024;

/// A record being built on the stack (child side).
pub(super) struct RecordBuf {
    buf: [u8; CAPACITY],
    len: usize,
}

impl RecordBuf {
    pub(super) fn new(tag: u8, step: u8, value: i32) -> RecordBuf {
        let mut buf = [0u8; CAPACITY];
        buf[0] = tag;
        buf[1] = step;
        buf[2..6].copy_from_slice(&value.to_le_bytes());
        RecordBuf { buf, len: HEADER }
    }

    /// Appends message bytes, silently truncating at the buffer's end.
    pub(super) fn push(&mut self, bytes: &[u8]) -> &mut Self {
        let room = CAPACITY - self.len;
        let n = bytes.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        self
    }

    /// The finished record.
    pub(super) fn bytes(&mut self) -> &[u8] {
        let msg_len = (self.len - HEADER) as u16;
        self.buf[6..8].copy_from_slice(&msg_len.to_le_bytes());
        &self.buf[..self.len]
    }
}

/// A decoded record (parent side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub tag: u8,
    pub step: Option<Step>,
    pub value: i32,
    pub message: String,
}

impl Record {
    /// Whether this is the builder's status ([`TAG_EXIT`], [`TAG_SIGNAL`]): init sends
    /// it last, once it is alone in the sandbox, and then exits.
    pub(super) fn is_end(&self) -> bool {
        self.tag == TAG_EXIT || self.tag == TAG_SIGNAL
    }
}

/// Whether `data` (what was read from the status pipe so far) holds the builder's
/// status, i.e. everything init will send.
pub(super) fn builder_ended(data: &[u8]) -> bool {
    parse(data).iter().any(Record::is_end)
}

/// Decodes everything read from the status pipe. A truncated tail (a process killed in
/// the middle of nothing: writes are atomic) is ignored.
pub(super) fn parse(mut data: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    while data.len() >= HEADER {
        let tag = data[0];
        let step = Step::from_u8(data[1]);
        let value = i32::from_le_bytes([data[2], data[3], data[4], data[5]]);
        let len = u16::from_le_bytes([data[6], data[7]]) as usize;
        if data.len() < HEADER + len {
            break;
        }
        let message = String::from_utf8_lossy(&data[HEADER..HEADER + len]).into_owned();
        out.push(Record {
            tag,
            step,
            value,
            message,
        });
        data = &data[HEADER + len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let mut a = RecordBuf::new(TAG_ERROR, Step::MountProc as u8, 1);
        a.push(b"mounting ").push(b"/proc");
        let mut b = RecordBuf::new(TAG_EXIT, 0, 3);
        let mut data = a.bytes().to_vec();
        data.extend_from_slice(b.bytes());
        data.extend_from_slice(&[TAG_EXIT, 0, 1]); // truncated tail
        let recs = parse(&data);
        assert_eq!(
            recs,
            vec![
                Record {
                    tag: TAG_ERROR,
                    step: Some(Step::MountProc),
                    value: 1,
                    message: "mounting /proc".into()
                },
                Record {
                    tag: TAG_EXIT,
                    step: None,
                    value: 3,
                    message: String::new()
                },
            ]
        );
    }

    #[test]
    fn only_the_builders_status_ends_the_stream() {
        let mut err = RecordBuf::new(TAG_ERROR, Step::Exec as u8, 2);
        err.push(b"execve");
        let err = err.bytes().to_vec();
        let nproc = RecordBuf::new(TAG_NPROC, 0, 100).bytes().to_vec();
        let exit = RecordBuf::new(TAG_EXIT, 0, 0).bytes().to_vec();
        let signal = RecordBuf::new(TAG_SIGNAL, 0, 9).bytes().to_vec();
        assert!(!builder_ended(&[]));
        assert!(!builder_ended(&err));
        // At the process limit init reports and exits; the others die with it, later.
        assert!(!builder_ended(&nproc));
        assert!(builder_ended(&exit));
        assert!(builder_ended(&signal));
        assert!(builder_ended(&[nproc.clone(), signal].concat()));
        // Not yet whole (cannot happen with atomic writes, but is not an end).
        assert!(!builder_ended(&exit[..exit.len() - 1]));
    }

    #[test]
    fn long_messages_are_truncated() {
        let mut a = RecordBuf::new(TAG_ERROR, 4, 2);
        a.push(&[b'x'; 5000]);
        let recs = parse(a.bytes());
        assert_eq!(recs[0].message.len(), CAPACITY - HEADER);
    }
}
