//! The metadata database: schema, migrations and the queries the local store runs.
//!
//! Owns: the SQLite schema (versioned; [`MIGRATIONS`] takes an empty database, version 0,
//! to [`SCHEMA_VERSION`]), the connection settings (WAL, `synchronous=NORMAL`, foreign
//! keys, a busy timeout so concurrent processes wait instead of failing) and the row
//! ⇄ value conversions.
//!
//! Must not: touch the store's files or take file locks; callers order database changes
//! against the filesystem (content first, registration last; rows first, content last).
//!
//! # Schema, version 1
//!
//! ```sql
//! schema_version (version INTEGER NOT NULL)                 -- exactly one row
//! valid_paths (id INTEGER PRIMARY KEY, path TEXT UNIQUE,    -- "/rocmx/store/<hash>-<name>"
//!              nar_hash TEXT, nar_size INTEGER,             -- "blake3:<hex>", bytes
//!              registration_time INTEGER,                   -- seconds since the epoch
//!              deriver TEXT NULL,                           -- a .drv store path
//!              signatures TEXT,                             -- JSON array of strings
//!              ca TEXT NULL)                                -- e.g. "source:blake3:<nix32>"
//! refs (referrer → valid_paths ON DELETE CASCADE,
//!       reference → valid_paths ON DELETE RESTRICT, PRIMARY KEY (referrer, reference))
//! realisations (drv_hash TEXT, output TEXT, path → valid_paths ON DELETE CASCADE,
//!               signatures TEXT, PRIMARY KEY (drv_hash, output))
//! derivation_outputs (drv → valid_paths ON DELETE CASCADE, output TEXT, path TEXT,
//!                     PRIMARY KEY (drv, output))
//! ```
//!
//! `ON DELETE RESTRICT` on `refs.reference` makes the database itself refuse to invalidate
//! a path that a valid path still refers to, so every valid path's closure stays valid.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::error::StoreError;
use super::PathInfo;
use crate::hash::{Encoding, Hash, HashAlgo};
use crate::path::StorePath;

/// The schema version this code reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// How long a connection waits for another process's write lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(600);

/// `MIGRATIONS[n]` takes the schema from version `n` to `n + 1`.
pub const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [MIGRATE_0_TO_1];

const MIGRATE_0_TO_1: &str = "
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (0);
CREATE TABLE valid_paths (
    id                INTEGER PRIMARY KEY,
    path              TEXT NOT NULL UNIQUE,
    nar_hash          TEXT NOT NULL,
    nar_size          INTEGER NOT NULL,
    registration_time INTEGER NOT NULL,
    deriver           TEXT,
    signatures        TEXT NOT NULL DEFAULT '[]',
    ca                TEXT
);
CREATE TABLE refs (
    referrer  INTEGER NOT NULL REFERENCES valid_paths(id) ON DELETE CASCADE,
    reference INTEGER NOT NULL REFERENCES valid_paths(id) ON DELETE RESTRICT,
    PRIMARY KEY (referrer, reference)
);
CREATE INDEX refs_reference ON refs(reference);
CREATE TABLE realisations (
    drv_hash   TEXT NOT NULL,
    output     TEXT NOT NULL,
    path       INTEGER NOT NULL REFERENCES valid_paths(id) ON DELETE CASCADE,
    signatures TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (drv_hash, output)
);
CREATE INDEX realisations_path ON realisations(path);
CREATE TABLE derivation_outputs (
    drv    INTEGER NOT NULL REFERENCES valid_paths(id) ON DELETE CASCADE,
    output TEXT NOT NULL,
    path   TEXT NOT NULL,
    PRIMARY KEY (drv, output)
);
CREATE INDEX derivation_outputs_path ON derivation_outputs(path);
";

/// A [`StoreError::Db`] maker for `map_err`.
pub fn err(db: &Path, context: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let db = db.to_path_buf();
    move |source| StoreError::Db {
        db,
        context,
        source,
    }
}

/// How many prepared statements a connection keeps (see [`open`]).
const STATEMENT_CACHE: usize = 64;

/// Opens (creating if needed) the database at `db`, sets WAL mode and the busy timeout, and
/// migrates it to [`SCHEMA_VERSION`].
pub fn open(db: &Path) -> Result<Connection, StoreError> {
    let mut conn = Connection::open(db).map_err(err(db, "opening"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(err(db, "setting the busy timeout"))?;
    // Switching to WAL needs a moment of exclusive access; retry while others hold it.
    let mut mode = String::new();
    for _ in 0..200 {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(m) => {
                mode = m;
                break;
            }
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(err(db, "enabling WAL mode")(e)),
        }
    }
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Db {
            db: db.to_path_buf(),
            context: "enabling WAL mode",
            source: rusqlite::Error::InvalidQuery,
        });
    }
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
        .map_err(err(db, "configuring"))?;
    // Every statement a build or a plan runs goes through `prepare_cached`, so it is
    // parsed once per connection, not once per call (parsing the realisation lookup's
    // join was 5 % of a chain of 50 trivial builds). rusqlite keeps 16 by default;
    // there are more than that.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    migrate(&mut conn, db)?;
    Ok(conn)
}

/// The schema version of `conn`: 0 for an empty database.
pub fn schema_version(conn: &Connection, db: &Path) -> Result<u32, StoreError> {
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version')",
            [],
            |r| r.get(0),
        )
        .map_err(err(db, "reading the schema version"))?;
    if !has_table {
        return Ok(0);
    }
    let v: i64 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .map_err(err(db, "reading the schema version"))?;
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction; returns the version found.
/// A newer schema is an error ([`StoreError::SchemaTooNew`]).
pub fn migrate(conn: &mut Connection, db: &Path) -> Result<u32, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err(db, "starting the migration"))?;
    let found = schema_version(&tx, db)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            db: db.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (step, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)
            .map_err(err(db, "migrating the schema"))?;
        tx.execute("UPDATE schema_version SET version = ?1", [step as i64 + 1])
            .map_err(err(db, "migrating the schema"))?;
    }
    tx.commit().map_err(err(db, "committing the migration"))?;
    Ok(found)
}

/// What [`register`] records about a new valid path.
pub struct NewPath<'a> {
    /// The path.
    pub path: &'a StorePath,
    /// BLAKE3 of its NAR.
    pub nar_hash: &'a Hash,
    /// Size of its NAR.
    pub nar_size: u64,
    /// The derivation that built it.
    pub deriver: Option<&'a StorePath>,
    /// Its content address in text form.
    pub ca: Option<&'a str>,
    /// Its references (may include itself).
    pub refs: &'a BTreeSet<StorePath>,
}

fn bad_path(what: &'static str, value: &str, why: impl ToString) -> StoreError {
    StoreError::BadRow {
        what,
        value: value.to_string(),
        why: why.to_string(),
    }
}

fn parse_path(what: &'static str, s: &str) -> Result<StorePath, StoreError> {
    StorePath::from_absolute(s).map_err(|e| bad_path(what, s, e))
}

fn parse_sigs(s: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(s).map_err(|e| bad_path("signatures", s, e))
}

/// The row id of `p`, if it is valid.
pub fn path_id(conn: &Connection, db: &Path, p: &StorePath) -> Result<Option<i64>, StoreError> {
    conn.prepare_cached("SELECT id FROM valid_paths WHERE path = ?1")
        .and_then(|mut s| s.query_row([p.to_absolute()], |r| r.get(0)).optional())
        .map_err(err(db, "looking up a path"))
}

/// Inserts a valid path and its references; every reference other than the path itself
/// must already be valid.
pub fn register(conn: &Connection, db: &Path, np: &NewPath<'_>) -> Result<i64, StoreError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    conn.prepare_cached(
        "INSERT INTO valid_paths (path, nar_hash, nar_size, registration_time, deriver, ca) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            np.path.to_absolute(),
            np.nar_hash.to_typed(Encoding::Base16),
            np.nar_size as i64,
            now,
            np.deriver.map(StorePath::to_absolute),
            np.ca,
        ])
    })
    .map_err(err(db, "registering a path"))?;
    let id = conn.last_insert_rowid();
    for r in np.refs {
        let rid = if r == np.path {
            id
        } else {
            path_id(conn, db, r)?.ok_or_else(|| StoreError::InvalidReference {
                path: np.path.clone(),
                reference: r.clone(),
            })?
        };
        conn.prepare_cached("INSERT OR IGNORE INTO refs (referrer, reference) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute([id, rid]))
            .map_err(err(db, "registering references"))?;
    }
    Ok(id)
}

/// Everything recorded about `p`, if it is valid.
pub fn path_info(
    conn: &Connection,
    db: &Path,
    p: &StorePath,
) -> Result<Option<PathInfo>, StoreError> {
    type Row = (
        i64,
        String,
        i64,
        i64,
        Option<String>,
        String,
        Option<String>,
    );
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT id, nar_hash, nar_size, registration_time, deriver, signatures, ca \
             FROM valid_paths WHERE path = ?1",
        )
        .and_then(|mut s| {
            s.query_row([p.to_absolute()], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .optional()
        })
        .map_err(err(db, "reading path info"))?;
    let Some((id, hash, size, time, deriver, sigs, ca)) = row else {
        return Ok(None);
    };
    let nar_hash = Hash::parse(&hash).map_err(|e| bad_path("nar_hash", &hash, e))?;
    if nar_hash.algo() != HashAlgo::Blake3 {
        return Err(bad_path("nar_hash", &hash, "not a blake3 hash"));
    }
    Ok(Some(PathInfo {
        path: p.clone(),
        nar_hash,
        nar_size: u64::try_from(size).map_err(|e| bad_path("nar_size", &size.to_string(), e))?,
        registration_time: time,
        deriver: deriver.map(|d| parse_path("deriver", &d)).transpose()?,
        signatures: parse_sigs(&sigs)?,
        references: references_of(conn, db, id)?,
        ca,
    }))
}

fn collect_paths(
    conn: &Connection,
    db: &Path,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<BTreeSet<StorePath>, StoreError> {
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(err(db, "reading references"))?;
    let rows = stmt
        .query_map(params, |r| r.get::<_, String>(0))
        .map_err(err(db, "reading references"))?;
    let mut out = BTreeSet::new();
    for row in rows {
        let s = row.map_err(err(db, "reading references"))?;
        out.insert(parse_path("path", &s)?);
    }
    Ok(out)
}

/// The closure of the paths with row ids `ids`: those paths and every path they refer
/// to, directly or not. One recursive query: walking it path by path took two queries
/// per path, a tenth of a millisecond per build for the 50th build of a chain.
pub fn closure_of(
    conn: &Connection,
    db: &Path,
    ids: &[i64],
) -> Result<BTreeSet<StorePath>, StoreError> {
    let list = format!(
        "[{}]",
        ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
    );
    collect_paths(
        conn,
        db,
        "WITH RECURSIVE c(id) AS (\
             SELECT value FROM json_each(?1) \
             UNION SELECT r.reference FROM refs r JOIN c ON r.referrer = c.id) \
         SELECT v.path FROM c JOIN valid_paths v ON v.id = c.id",
        [list],
    )
}

/// The references of the path with row id `id`.
pub fn references_of(
    conn: &Connection,
    db: &Path,
    id: i64,
) -> Result<BTreeSet<StorePath>, StoreError> {
    collect_paths(
        conn,
        db,
        "SELECT v.path FROM refs r JOIN valid_paths v ON v.id = r.reference WHERE r.referrer = ?1",
        [id],
    )
}

/// The valid paths referring to the path with row id `id` (itself included if it refers
/// to itself).
pub fn referrers_of(
    conn: &Connection,
    db: &Path,
    id: i64,
) -> Result<BTreeSet<StorePath>, StoreError> {
    collect_paths(
        conn,
        db,
        "SELECT v.path FROM refs r JOIN valid_paths v ON v.id = r.referrer WHERE r.reference = ?1",
        [id],
    )
}

/// Every valid path with its NAR hash and size, in path order.
/// The valid path whose hash part is `hash` (32 nix32 characters), if any.
pub fn path_from_hash_part(
    conn: &Connection,
    db: &Path,
    hash: &str,
) -> Result<Option<StorePath>, StoreError> {
    // A range on the indexed column: `/rocmx/store/<hash>-` up to `…<hash>.` (the
    // character after `-`).
    let lo = format!("{}/{hash}-", crate::path::STORE_DIR);
    let hi = format!("{}/{hash}.", crate::path::STORE_DIR);
    let row: Option<String> = conn
        .prepare_cached("SELECT path FROM valid_paths WHERE path >= ?1 AND path < ?2 LIMIT 1")
        .and_then(|mut s| s.query_row([&lo, &hi], |r| r.get(0)).optional())
        .map_err(err(db, "looking up a hash part"))?;
    row.map(|p| parse_path("path", &p)).transpose()
}

pub fn all_valid(conn: &Connection, db: &Path) -> Result<Vec<(StorePath, Hash, u64)>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT path, nar_hash, nar_size FROM valid_paths")
        .map_err(err(db, "listing valid paths"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(err(db, "listing valid paths"))?;
    let mut out = Vec::new();
    for row in rows {
        let (p, h, s) = row.map_err(err(db, "listing valid paths"))?;
        let hash = Hash::parse(&h).map_err(|e| bad_path("nar_hash", &h, e))?;
        out.push((parse_path("path", &p)?, hash, u64::try_from(s).unwrap_or(0)));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Every reference as (referrer, reference), self-references included.
pub fn all_refs(conn: &Connection, db: &Path) -> Result<Vec<(StorePath, StorePath)>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT a.path, b.path FROM refs r JOIN valid_paths a ON a.id = r.referrer \
             JOIN valid_paths b ON b.id = r.reference",
        )
        .map_err(err(db, "reading references"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(err(db, "reading references"))?;
    let mut out = Vec::new();
    for row in rows {
        let (a, b) = row.map_err(err(db, "reading references"))?;
        out.push((parse_path("path", &a)?, parse_path("path", &b)?));
    }
    Ok(out)
}

/// Every valid path that has a recorded deriver, as `(path, deriver)`; the deriver need
/// not be valid.
pub fn all_derivers(
    conn: &Connection,
    db: &Path,
) -> Result<Vec<(StorePath, StorePath)>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT path, deriver FROM valid_paths WHERE deriver IS NOT NULL")
        .map_err(err(db, "reading derivers"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(err(db, "reading derivers"))?;
    let mut out = Vec::new();
    for row in rows {
        let (p, d) = row.map_err(err(db, "reading derivers"))?;
        out.push((parse_path("path", &p)?, parse_path("deriver", &d)?));
    }
    Ok(out)
}

/// Every recorded derivation output, as `(valid derivation, output path)`; the output
/// need not be valid.
pub fn all_derivation_outputs(
    conn: &Connection,
    db: &Path,
) -> Result<Vec<(StorePath, StorePath)>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT v.path, o.path FROM derivation_outputs o JOIN valid_paths v ON v.id = o.drv",
        )
        .map_err(err(db, "reading derivation outputs"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(err(db, "reading derivation outputs"))?;
    let mut out = Vec::new();
    for row in rows {
        let (d, p) = row.map_err(err(db, "reading derivation outputs"))?;
        out.push((
            parse_path("path", &d)?,
            parse_path("derivation output", &p)?,
        ));
    }
    Ok(out)
}

/// Invalidates all of `paths` at once: their references first, then their rows, so that
/// references among them (even cycles) do not stand in the way.
pub fn invalidate_all(conn: &Connection, db: &Path, paths: &[StorePath]) -> Result<(), StoreError> {
    let mut ids = Vec::new();
    for p in paths {
        if let Some(id) = path_id(conn, db, p)? {
            conn.execute("DELETE FROM refs WHERE referrer = ?1", [id])
                .map_err(err(db, "invalidating a path"))?;
            ids.push(id);
        }
    }
    for id in ids {
        conn.execute("DELETE FROM valid_paths WHERE id = ?1", [id])
            .map_err(err(db, "invalidating a path"))?;
    }
    Ok(())
}

/// Pairs (referrer, reference) whose reference has no valid row: only possible if the
/// database was edited with foreign keys off.
pub fn dangling_refs(conn: &Connection, db: &Path) -> Result<Vec<(StorePath, String)>, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT v.path, r.reference FROM refs r JOIN valid_paths v ON v.id = r.referrer \
             WHERE r.reference NOT IN (SELECT id FROM valid_paths)",
        )
        .map_err(err(db, "checking references"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(err(db, "checking references"))?;
    let mut out = Vec::new();
    for row in rows {
        let (p, id) = row.map_err(err(db, "checking references"))?;
        out.push((parse_path("path", &p)?, format!("row {id}")));
    }
    Ok(out)
}

/// Records `drv_hash!output → path` with `signatures`, merging signatures when the same
/// path is recorded again. `path` must be valid.
pub fn add_realisation(
    conn: &Connection,
    db: &Path,
    drv_hash: &str,
    output: &str,
    path: &StorePath,
    root: &Path,
    signatures: &[String],
) -> Result<(), StoreError> {
    let id = path_id(conn, db, path)?.ok_or_else(|| StoreError::NotValid {
        path: path.clone(),
        root: root.to_path_buf(),
    })?;
    let mut sigs: Vec<String> = Vec::new();
    if let Some((existing, s)) = query_realisation(conn, db, drv_hash, output)? {
        if &existing != path {
            return Err(StoreError::RealisationConflict {
                realisation: format!("{drv_hash}!{output}"),
                existing,
                new: path.clone(),
            });
        }
        sigs = s;
    }
    for s in signatures {
        if !sigs.contains(s) {
            sigs.push(s.clone());
        }
    }
    let json = serde_json::to_string(&sigs).unwrap_or_else(|_| "[]".to_string());
    conn.prepare_cached(
        "INSERT OR REPLACE INTO realisations (drv_hash, output, path, signatures) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![drv_hash, output, id, json]))
    .map_err(err(db, "recording a realisation"))?;
    Ok(())
}

/// The path `drv_hash!output` was realised to, with its signatures.
pub fn query_realisation(
    conn: &Connection,
    db: &Path,
    drv_hash: &str,
    output: &str,
) -> Result<Option<(StorePath, Vec<String>)>, StoreError> {
    let row: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT v.path, r.signatures FROM realisations r JOIN valid_paths v ON v.id = r.path \
             WHERE r.drv_hash = ?1 AND r.output = ?2",
        )
        .and_then(|mut s| {
            s.query_row([drv_hash, output], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(err(db, "reading a realisation"))?;
    row.map(|(p, s)| Ok((parse_path("realisation path", &p)?, parse_sigs(&s)?)))
        .transpose()
}

/// Merges `signatures` into the valid path's; `false` if `path` is not valid.
pub fn add_signatures(
    conn: &Connection,
    db: &Path,
    path: &StorePath,
    signatures: &[String],
) -> Result<bool, StoreError> {
    let row: Option<String> = conn
        .prepare_cached("SELECT signatures FROM valid_paths WHERE path = ?1")
        .and_then(|mut s| s.query_row([path.to_absolute()], |r| r.get(0)).optional())
        .map_err(err(db, "reading signatures"))?;
    let Some(existing) = row else {
        return Ok(false);
    };
    let mut sigs = parse_sigs(&existing)?;
    for s in signatures {
        if !sigs.contains(s) {
            sigs.push(s.clone());
        }
    }
    let json = serde_json::to_string(&sigs).unwrap_or_else(|_| "[]".to_string());
    conn.prepare_cached("UPDATE valid_paths SET signatures = ?1 WHERE path = ?2")
        .and_then(|mut s| s.execute(params![json, path.to_absolute()]))
        .map_err(err(db, "recording signatures"))?;
    Ok(true)
}

/// The realisations pointing at `path`: `(drv_hash, output, signatures)`, sorted.
pub fn realisations_of(
    conn: &Connection,
    db: &Path,
    path: &StorePath,
) -> Result<Vec<(String, String, Vec<String>)>, StoreError> {
    let mut st = conn
        .prepare_cached(
            "SELECT r.drv_hash, r.output, r.signatures FROM realisations r \
             JOIN valid_paths v ON v.id = r.path WHERE v.path = ?1 \
             ORDER BY r.drv_hash, r.output",
        )
        .map_err(err(db, "reading realisations"))?;
    let rows = st
        .query_map([path.to_absolute()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(err(db, "reading realisations"))?;
    let mut out = Vec::new();
    for row in rows {
        let (h, o, s) = row.map_err(err(db, "reading realisations"))?;
        out.push((h, o, parse_sigs(&s)?));
    }
    Ok(out)
}

/// Records that output `output` of the valid derivation `drv_id` is `path`.
pub fn add_derivation_output(
    conn: &Connection,
    db: &Path,
    drv_id: i64,
    output: &str,
    path: &StorePath,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO derivation_outputs (drv, output, path) VALUES (?1, ?2, ?3)",
    )
    .and_then(|mut s| s.execute(params![drv_id, output, path.to_absolute()]))
    .map_err(err(db, "recording a derivation output"))?;
    Ok(())
}

/// The recorded outputs of the derivation with row id `drv_id`.
pub fn derivation_outputs(
    conn: &Connection,
    db: &Path,
    drv_id: i64,
) -> Result<Vec<(String, StorePath)>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT output, path FROM derivation_outputs WHERE drv = ?1 ORDER BY output",
        )
        .map_err(err(db, "reading derivation outputs"))?;
    let rows = stmt
        .query_map([drv_id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(err(db, "reading derivation outputs"))?;
    let mut out = Vec::new();
    for row in rows {
        let (o, p) = row.map_err(err(db, "reading derivation outputs"))?;
        out.push((o, parse_path("derivation output", &p)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(conn: &Connection) -> Vec<String> {
        let mut s = conn
            .prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
            .expect("prepare");
        let rows = s.query_map([], |r| r.get(0)).expect("query");
        rows.map(|r| r.expect("row")).collect()
    }

    #[test]
    fn migrates_an_empty_database_to_version_1() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("db.sqlite");
        let mut conn = Connection::open(&path).expect("open");
        assert_eq!(schema_version(&conn, &path).expect("v"), 0);
        assert_eq!(migrate(&mut conn, &path).expect("migrate"), 0);
        assert_eq!(schema_version(&conn, &path).expect("v"), 1);
        assert_eq!(
            tables(&conn),
            [
                "derivation_outputs",
                "realisations",
                "refs",
                "schema_version",
                "valid_paths"
            ]
        );
        // Idempotent: a second run finds version 1 and changes nothing.
        assert_eq!(migrate(&mut conn, &path).expect("again"), 1);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM schema_version", [], |r| r.get(0))
            .expect("count");
        assert_eq!(rows, 1);
        drop(conn);
        // `open` sets WAL and sees the migrated schema.
        let conn = open(&path).expect("open");
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .expect("mode");
        assert_eq!(mode, "wal");
    }

    #[test]
    fn refuses_a_newer_schema() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("db.sqlite");
        let conn = open(&path).expect("open");
        conn.execute("UPDATE schema_version SET version = 7", [])
            .expect("bump");
        drop(conn);
        let e = open(&path).expect_err("newer");
        assert_eq!(
            e.to_string(),
            format!(
                "store database {path:?} has schema version 7, newer than the 1 this rocmx \
                 supports; upgrade rocmx or use another --store"
            )
        );
    }

    #[test]
    fn references_are_restricted() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("db.sqlite");
        let conn = open(&path).expect("open");
        let a: StorePath = "/rocmx/store/00bgd045z0d4icpbc2yyz4gx48ak44la-a"
            .parse()
            .expect("a");
        let b: StorePath = "/rocmx/store/zzbgd045z0d4icpbc2yyz4gx48ak44la-b"
            .parse()
            .expect("b");
        let h = Hash::digest(HashAlgo::Blake3, b"");
        let none = BTreeSet::new();
        let mk = |p: &StorePath, refs: &BTreeSet<StorePath>| {
            register(
                &conn,
                &path,
                &NewPath {
                    path: p,
                    nar_hash: &h,
                    nar_size: 8,
                    deriver: None,
                    ca: None,
                    refs,
                },
            )
        };
        let e = mk(&b, &[a.clone()].into()).expect_err("a is not valid");
        assert!(matches!(e, StoreError::InvalidReference { .. }), "{e}");
        mk(&a, &none).expect("a");
        conn.execute("DELETE FROM valid_paths WHERE path = ?1", [b.to_absolute()])
            .expect("undo");
        mk(&b, &[a.clone(), b.clone()].into()).expect("b refers to a and itself");
        assert!(
            invalidate_all(&conn, &path, std::slice::from_ref(&a)).is_err(),
            "b still refers to a"
        );
        invalidate_all(&conn, &path, std::slice::from_ref(&b))
            .expect("b, despite its self-reference");
        invalidate_all(&conn, &path, std::slice::from_ref(&a)).expect("a");
        assert_eq!(all_valid(&conn, &path).expect("all").len(), 0);
    }
}
