//! walrus-bench measures walrus (crate walrus-rust 0.2.0), embedded in this
//! process, through the workloads of Tern's load generator: it takes the
//! flags of loadgen.Main (bench/loadgen/driver.go), runs the same presets
//! the same way (bench/loadgen/run.go) and prints the same JSON line and
//! table, since loadgen is Go and walrus is Rust.
//!
//! One instance per run, `Walrus::with_consistency_and_schedule_for_key`
//! with ReadConsistency::StrictlyAtOnce, its files under --dir (through
//! WALRUS_DATA_DIR). A log is a topic, "log-N"; an append of one entry is
//! `append_for_topic`, of several `batch_append_for_topic` (io_uring).
//!
//! Variants:
//!   - durable: FsyncSchedule::SyncEach. walrus opens its files O_SYNC and
//!     also fsyncs after every entry, inside the topic's lock: appends to a
//!     topic are one at a time, with no group commit, so 64 producers on
//!     one topic wait in line. conc-4k and conc-64k are therefore run both
//!     on one topic and on 64 (--logs 64, one producer each). After the run
//!     the driver reads the flags of walrus's open data files in
//!     /proc/self/fdinfo and fails unless they are all O_SYNC.
//!   - default: FsyncSchedule::Milliseconds(200), walrus's default: a
//!     background thread fsyncs written files every 200 ms, so an
//!     acknowledged entry is not yet durable. The driver checks that no data
//!     file is O_SYNC.
//!
//! Facts that bear on fairness: walrus ignores the result of its pwrite, so
//! a failed write cannot be reported here; a topic's single appends and
//! batch appends must not overlap (walrus answers WouldBlock), so the
//! driver holds a per-topic lock, shared by single appends and exclusive for
//! a batch, which costs nothing since walrus serialises a topic's writes
//! anyway. walrus has no asynchronous append and no way to wait for new
//! entries: async-100b and e2e-1k are not run (pubsub publishes with as
//! many synchronous producers as it has entries in flight, as loadgen does
//! for such a target, and says so in the notes). Reading is
//! `batch_read_for_topic` from the start of the topic, which with
//! StrictlyAtOnce persists the read position once per call; its byte budget
//! is chosen to avoid a walrus 0.2.0 bug that skips entries (read_budget).
//! walrus's data files are 1 GB sparse files: storage is what du counts.
//!
//! The load is closed-loop unless --rate is given (open loop: latency from
//! each append's intended start). CPU time and peak memory are this
//! process's, which holds walrus and the load generator.

mod load;
mod result;

use load::Load;
use result::{ProcMeter, Result};
use serde::{Serialize, Serializer};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use walrus_rust::{FsyncSchedule, ReadConsistency, Walrus};

const VERSION: &str = "0.2.0";
const VARIANTS: [&str; 2] = ["durable", "default"];

#[derive(Clone, Copy, PartialEq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Append,
    E2e,
    Catchup,
    Pubsub,
}

/// Spec is loadgen.Spec, serialized as Go does (durations in nanoseconds).
#[derive(Clone, Default, Serialize)]
pub struct Spec {
    name: String,
    kind: Kind,
    entry_bytes: usize,
    batch: usize,
    producers: usize,
    in_flight: usize,
    rate: f64,
    logs: usize,
    #[serde(serialize_with = "nanos")]
    duration: Duration,
    #[serde(serialize_with = "nanos")]
    warmup: Duration,
    #[serde(skip_serializing_if = "is_zero")]
    total_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    count: u64,
}

fn nanos<S: Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_nanos() as u64)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// PRESETS mirrors loadgen.Presets (bench/loadgen/spec.go): keep them equal.
const PRESETS: [&str; 10] = [
    "async-100b",
    "catchup-1g",
    "conc-4k",
    "conc-64k",
    "e2e-1k",
    "pubsub-1k",
    "pubsub-1m",
    "pubsub-5m",
    "pubsub-64k",
    "sync-1k",
];

fn preset(name: &str) -> Option<Spec> {
    let s = |kind, entry_bytes, producers, in_flight| Spec {
        name: name.to_string(),
        kind,
        entry_bytes,
        producers,
        in_flight,
        ..Spec::default()
    };
    let pubsub = |entry_bytes, count| Spec {
        count,
        ..s(Kind::Pubsub, entry_bytes, 0, 64)
    };
    Some(match name {
        "sync-1k" => s(Kind::Append, 1 << 10, 1, 0),
        "conc-4k" => s(Kind::Append, 4 << 10, 64, 0),
        "conc-64k" => s(Kind::Append, 64 << 10, 64, 0),
        "async-100b" => s(Kind::Append, 100, 1, 10_000),
        "catchup-1g" => Spec {
            total_bytes: 1 << 30,
            ..s(Kind::Catchup, 64 << 10, 0, 0)
        },
        "e2e-1k" => Spec {
            rate: 1000.0,
            ..s(Kind::E2e, 1 << 10, 0, 0)
        },
        "pubsub-5m" => pubsub(5_000_000, 100),
        "pubsub-1m" => pubsub(1_000_000, 500),
        "pubsub-64k" => pubsub(64_000, 10_000),
        "pubsub-1k" => pubsub(1_000, 50_000),
        _ => return None,
    })
}

impl Spec {
    /// normalize fills in defaults and reports a spec that cannot run, as
    /// loadgen.Spec.Normalize does.
    fn normalize(mut self) -> std::result::Result<Spec, String> {
        self.batch = self.batch.max(1);
        self.producers = self.producers.max(1);
        self.logs = self.logs.max(1);
        if self.duration.is_zero() {
            self.duration = Duration::from_secs(10);
        }
        let name = &self.name;
        match self.kind {
            Kind::E2e if self.rate == 0.0 => Err(format!(
                "workload {name:?}: an end-to-end workload needs a rate"
            )),
            Kind::Catchup if self.total_bytes == 0 || self.entry_bytes == 0 => Err(format!(
                "workload {name:?}: a catch-up workload needs total bytes and an entry size"
            )),
            Kind::Pubsub if self.count == 0 => {
                Err(format!("workload {name:?}: a pubsub round needs a count"))
            }
            _ => Ok(self),
        }
    }
}

/// Args are the flags of loadgen.Main.
struct Args {
    variant: String,
    dir: Option<PathBuf>,
    json: Option<PathBuf>,
    storage_dir: Option<PathBuf>,
    spec: Spec,
}

const USAGE: &str =
    "usage: walrus-bench --workload NAME [--variant durable|default] [--dir DIR] [--json FILE] \
[--storage-dir DIR] [--duration D] [--warmup D] [--entry-bytes N] [--batch N] [--producers N] \
[--in-flight N] [--rate R] [--logs N] [--count N] [--total-bytes N]";

fn parse_args(args: &[String]) -> std::result::Result<Args, String> {
    let mut flags: Vec<(String, String)> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-h" || a == "--help" {
            return Err("help requested".to_string());
        }
        let Some(name) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            return Err(format!("unexpected argument {a:?}"));
        };
        let (name, value) = match name.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => (
                name.to_string(),
                it.next()
                    .ok_or(format!("flag needs an argument: -{name}"))?
                    .clone(),
            ),
        };
        flags.push((name, value));
    }
    let get = |name: &str| {
        flags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let workload = get("workload").ok_or(format!("--workload is required (one of {PRESETS:?})"))?;
    let mut spec = preset(&workload).ok_or(format!(
        "no workload {workload:?} (want one of {PRESETS:?})"
    ))?;
    let num = |v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("invalid value {v:?}: want a whole number"))
    };
    let dur =
        |v: &str| humantime::parse_duration(v).map_err(|e| format!("invalid duration {v:?}: {e}"));
    let mut a = Args {
        variant: VARIANTS[0].to_string(),
        dir: None,
        json: None,
        storage_dir: None,
        spec: Spec::default(),
    };
    for (name, v) in &flags {
        match name.as_str() {
            "workload" => {}
            "variant" => a.variant = v.clone(),
            "dir" => a.dir = Some(v.into()),
            "json" => a.json = Some(v.into()),
            "storage-dir" => a.storage_dir = Some(v.into()),
            "addr" | "pid" => {
                return Err(format!(
                    "--{name}: walrus is embedded in this driver, there is no server"
                ))
            }
            "entry-bytes" => spec.entry_bytes = num(v)? as usize,
            "batch" => spec.batch = num(v)? as usize,
            "producers" => spec.producers = num(v)? as usize,
            "in-flight" => spec.in_flight = num(v)? as usize,
            "rate" => spec.rate = v.parse().map_err(|_| format!("invalid --rate {v:?}"))?,
            "logs" => spec.logs = num(v)? as usize,
            "duration" => spec.duration = dur(v)?,
            "warmup" => spec.warmup = dur(v)?,
            "total-bytes" => spec.total_bytes = num(v)?,
            "count" => spec.count = num(v)?,
            _ => return Err(format!("flag provided but not defined: -{name}")),
        }
    }
    if !VARIANTS.contains(&a.variant.as_str()) {
        return Err(format!(
            "unknown --variant {:?} (want one of {VARIANTS:?})",
            a.variant
        ));
    }
    a.spec = spec.normalize()?;
    Ok(a)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("walrus: usage: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(args) {
        eprintln!("walrus: {e}");
        std::process::exit(1);
    }
    // walrus's background threads never end: leave without waiting.
    std::process::exit(0);
}

fn run(a: Args) -> std::result::Result<(), String> {
    let tmp = a.dir.is_none();
    let dir = a.dir.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        std::env::temp_dir().join(format!("walrus-bench-{}-{nanos}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let storage_dir = a.storage_dir.clone().unwrap_or_else(|| dir.clone());
    let res = open(&a.variant, &dir, a.spec.logs)
        .map(Arc::new)
        .and_then(|t| {
            let mut r = run_workload(&a.spec, &t, &storage_dir)?;
            t.check_sync(&dir, a.variant == "durable")?;
            r.system = "walrus".to_string();
            r.variant = a.variant.clone();
            r.version = VERSION.to_string();
            Ok(r)
        });
    if tmp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let r = res?;
    result::write_table(&mut io::stderr(), &r).map_err(|e| e.to_string())?;
    let mut line = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    line.push('\n');
    match &a.json {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| format!("write {}: {e}", path.display())),
        None => io::stdout()
            .write_all(line.as_bytes())
            .map_err(|e| e.to_string()),
    }
}

/// Target is one walrus instance, with a lock per topic that keeps a
/// batch append from overlapping other appends to its topic.
struct Target {
    wal: Walrus,
    topics: Vec<String>,
    locks: Vec<RwLock<()>>,
}

fn open(variant: &str, dir: &Path, logs: usize) -> std::result::Result<Target, String> {
    // walrus reads its configuration from the environment when an instance
    // is made; without WALRUS_QUIET it prints a line per entry.
    std::env::set_var("WALRUS_DATA_DIR", dir);
    std::env::set_var("WALRUS_QUIET", "1");
    let schedule = match variant {
        "durable" => FsyncSchedule::SyncEach,
        _ => FsyncSchedule::Milliseconds(200),
    };
    let wal = Walrus::with_consistency_and_schedule_for_key(
        "bench",
        ReadConsistency::StrictlyAtOnce,
        schedule,
    )
    .map_err(|e| format!("open walrus in {}: {e}", dir.display()))?;
    Ok(Target {
        wal,
        topics: (0..logs).map(|i| format!("log-{i}")).collect(),
        locks: (0..logs).map(|_| RwLock::new(())).collect(),
    })
}

impl Target {
    fn append(&self, log: usize, entries: &[&[u8]]) -> io::Result<()> {
        if let [entry] = entries {
            let _shared = self.locks[log].read().unwrap_or_else(|e| e.into_inner());
            return self.wal.append_for_topic(&self.topics[log], entry);
        }
        let _exclusive = self.locks[log].write().unwrap_or_else(|e| e.into_inner());
        self.wal.batch_append_for_topic(&self.topics[log], entries)
    }

    /// read calls f with the entries of log from its start until it has
    /// had want of them. Everything asked for was acknowledged before the
    /// read began, so a log that ends first has lost writes.
    fn read(
        &self,
        log: usize,
        entry_bytes: usize,
        want: u64,
        mut f: impl FnMut(&[u8]),
    ) -> io::Result<()> {
        let max_bytes = read_budget(entry_bytes);
        let mut n = 0;
        while n < want {
            let entries = self
                .wal
                .batch_read_for_topic(&self.topics[log], max_bytes, true)?;
            if entries.is_empty() {
                return Err(io::Error::other(format!(
                    "log {log} ended after {n} of {want} entries"
                )));
            }
            for e in entries.iter().take((want - n) as usize) {
                f(&e.data);
                n += 1;
            }
        }
        Ok(())
    }

    /// check_sync fails unless every walrus data file this process has open
    /// is O_SYNC when durable, and none is otherwise.
    fn check_sync(&self, dir: &Path, durable: bool) -> std::result::Result<(), String> {
        let dir = dir.canonicalize().map_err(|e| e.to_string())?;
        let mut files = 0;
        for fd in std::fs::read_dir("/proc/self/fd")
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let Ok(path) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if !path.starts_with(&dir) || path.to_string_lossy().contains("_index.db") {
                continue;
            }
            let info = std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(fd.file_name()))
                .unwrap_or_default();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
                .ok_or(format!(
                    "no flags for {} in /proc/self/fdinfo",
                    path.display()
                ))?;
            let o_sync = flags & libc::O_SYNC as u32 == libc::O_SYNC as u32;
            if o_sync != durable {
                return Err(format!(
                    "walrus data file {} is {}O_SYNC: FsyncSchedule::{} did not take effect",
                    path.display(),
                    if o_sync { "" } else { "not " },
                    if durable {
                        "SyncEach"
                    } else {
                        "Milliseconds(200)"
                    },
                ));
            }
            files += 1;
        }
        if files == 0 {
            return Err(format!(
                "no walrus data file open under {}: cannot check how it syncs",
                dir.display()
            ));
        }
        Ok(())
    }
}

/// read_budget is the max_bytes of each batch_read_for_topic call when
/// every entry has entry_bytes of payload. In walrus 0.2.0 a call plans
/// max_bytes of records (a 64-byte header and the payload) over the sealed
/// blocks, and when that ends inside the last sealed block it also reads
/// the active block and then skips what it did not plan of the sealed one:
/// entries are lost. So the budget is a whole number k of records, and the
/// call must stop after k entries: either k is walrus's cap of 2000 entries
/// a call, or k records hold fewer than k + 1 payloads (entry_bytes > 64k).
/// It also keeps a call near 8 MiB where it can.
fn read_budget(entry_bytes: usize) -> usize {
    const HEADER: usize = 64;
    let record = entry_bytes + HEADER;
    let mut k = ((8 << 20) / record).max(1);
    if k >= entry_bytes / HEADER {
        k = 2000;
    }
    k * record
}

fn run_workload(
    spec: &Spec,
    t: &Arc<Target>,
    storage_dir: &Path,
) -> std::result::Result<Result, String> {
    let mut r = Result {
        workload: spec.name.clone(),
        spec: spec.clone(),
        started: result::now_rfc3339(),
        ..Result::default()
    };
    match spec.kind {
        Kind::Append => {
            let mut l = Load::new(spec.clone(), t.clone())?;
            let m = ProcMeter::start();
            l.run();
            l.finish(&mut r, m);
        }
        Kind::E2e => {
            return Err(format!(
                "workload {:?} needs a reader that follows the tail, and walrus cannot wait for new entries (a reader must poll)",
                spec.name
            ))
        }
        Kind::Catchup => run_catchup(spec, t, storage_dir, &mut r)?,
        Kind::Pubsub => run_pubsub(spec, t, storage_dir, &mut r)?,
    }
    if r.seconds > 0.0 {
        r.mb_per_s = r.bytes as f64 / 1e6 / r.seconds;
        r.entries_per_s = r.entries as f64 / r.seconds;
    }
    if r.storage_bytes == 0 {
        r.storage_bytes = result::dir_bytes(storage_dir);
    }
    Ok(r)
}

fn run_catchup(
    spec: &Spec,
    t: &Arc<Target>,
    storage_dir: &Path,
    r: &mut Result,
) -> std::result::Result<(), String> {
    // Write the data as fast as the target takes it, unmeasured.
    let mut w = spec.clone();
    w.count = spec.total_bytes / spec.entry_bytes as u64;
    w.batch = spec.batch.max((1 << 20) / spec.entry_bytes);
    (w.producers, w.in_flight, w.rate) = (4, 0, 0.0);
    let mut l = Load::new(w, t.clone())?;
    let t0 = Instant::now();
    l.run();
    if let Some(e) = l.first_err.lock().unwrap().clone() {
        return Err(format!(
            "{} appends of the data to read failed: {e}",
            l.errs.load(Ordering::Relaxed)
        ));
    }
    let written = l.acked_all.load(Ordering::Relaxed);
    r.extra.insert("write_s".into(), t0.elapsed().as_secs_f64());
    r.storage_bytes = result::dir_bytes(storage_dir);
    r.notes.push(result::drop_caches());

    let m = ProcMeter::start();
    let (mut n, mut bytes, mut first) = (0u64, 0u64, Duration::ZERO);
    let t0 = Instant::now();
    t.read(0, spec.entry_bytes, written, |e| {
        if n == 0 {
            first = t0.elapsed();
        }
        n += 1;
        bytes += e.len() as u64;
    })
    .map_err(|e| format!("catch-up read stopped after {n} of {written} entries: {e}"))?;
    r.seconds = t0.elapsed().as_secs_f64();
    (r.entries, r.bytes) = (n, bytes);
    r.extra
        .insert("first_entry_ms".into(), first.as_micros() as f64 / 1e3);
    let (cpu, rss, note) = m.stop();
    (r.cpu_s, r.peak_rss_bytes) = (cpu, rss);
    r.notes.extend(note);
    Ok(())
}

fn run_pubsub(
    spec: &Spec,
    t: &Arc<Target>,
    storage_dir: &Path,
    r: &mut Result,
) -> std::result::Result<(), String> {
    let mut spec = spec.clone();
    if spec.in_flight > 0 {
        (spec.producers, spec.in_flight) = (spec.in_flight, 0);
        r.notes.push(format!(
            "published by {} synchronous producers: the target has no asynchronous append",
            spec.producers
        ));
    }
    let mut l = Load::new(spec.clone(), t.clone())?;
    let m = ProcMeter::start();
    let t0 = Instant::now();
    l.run();
    let produce = t0.elapsed();
    r.storage_bytes = result::dir_bytes(storage_dir);
    let want = l.acked_all.load(Ordering::Relaxed);
    let mut n = 0;
    let t1 = Instant::now();
    t.read(0, spec.entry_bytes, want, |_| n += 1)
        .map_err(|e| format!("consumed {n} of {want} entries: {e}"))?;
    let consume = t1.elapsed();
    l.finish(r, m);
    r.seconds = (produce + consume).as_secs_f64();
    r.extra.insert("produce_s".into(), produce.as_secs_f64());
    r.extra.insert("consume_s".into(), consume.as_secs_f64());
    Ok(())
}
