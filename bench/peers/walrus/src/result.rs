//! The result of a run, in the JSON of bench/loadgen/result.go, and how its
//! figures are measured: the same histogram bounds and percentiles as
//! bench/loadgen/measure.go, CPU time from getrusage, peak memory from
//! VmHWM after resetting it, storage as du counts it.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Result is loadgen.Result: its field names are a contract with
/// bench/report.
#[derive(Serialize, Default)]
pub struct Result {
    pub system: String,
    pub variant: String,
    pub workload: String,
    pub spec: crate::Spec,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// RFC 3339 in UTC, as Go writes a time.Time.
    pub started: String,
    pub seconds: f64,
    pub entries: u64,
    pub bytes: u64,
    pub mb_per_s: f64,
    pub entries_per_s: f64,
    pub latency_us: Latency,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<[f64; 2]>,
    pub cpu_s: f64,
    pub peak_rss_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub storage_bytes: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub first_error: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Serialize, Default)]
pub struct Latency {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_nanos(SystemTime::now()).to_string()
}

/// new_histogram records microseconds from 1 µs to an hour with three
/// significant digits, as loadgen.NewHistogram.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3600 * 1_000_000, 3).expect("valid histogram bounds")
}

/// record adds one latency as loadgen's Histogram.Record does: truncated to
/// whole microseconds, at least 1, at most an hour.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_micros() as u64).max(1));
}

/// summary returns Result.latency_us and Result.percentiles: percentiles
/// evenly spaced in "nines" up to what the samples can tell, then the max.
pub fn summary(h: &Histogram<u64>) -> (Latency, Vec<[f64; 2]>) {
    if h.is_empty() {
        return (Latency::default(), Vec::new());
    }
    let q = |p: f64| h.value_at_percentile(p) as f64;
    let l = Latency {
        count: h.len(),
        mean: (h.mean() * 10.0).round() / 10.0,
        p50: q(50.0),
        p90: q(90.0),
        p99: q(99.0),
        p999: q(99.9),
        max: h.max() as f64,
    };
    let mut dist = Vec::new();
    let mut x = 0.0f64;
    while x <= 5.0001 {
        let p = 100.0 * (1.0 - 10f64.powf(-x));
        if p > 100.0 * (1.0 - 1.0 / h.len() as f64) && x > 0.0 {
            break;
        }
        dist.push([(p * 10000.0).round() / 10000.0, q(p)]);
        x += 0.1;
    }
    dist.push([100.0, l.max]);
    (l, dist)
}

/// ProcMeter measures this process's CPU time and peak memory from start
/// to stop.
pub struct ProcMeter {
    cpu0: f64,
    note: Option<String>,
}

impl ProcMeter {
    /// start resets the peak RSS (so that stop reports the peak of the
    /// measured part only) and reads the CPU time so far.
    pub fn start() -> ProcMeter {
        let note = std::fs::write("/proc/self/clear_refs", "5")
            .err()
            .map(|e| format!("peak memory is since the process started: resetting it failed: {e}"));
        ProcMeter {
            cpu0: cpu_seconds(),
            note,
        }
    }

    /// stop returns the CPU seconds (user and system) since start, the peak
    /// resident memory in bytes, and a note when either is not what it says.
    pub fn stop(self) -> (f64, u64, Option<String>) {
        let cpu = cpu_seconds() - self.cpu0;
        match peak_rss() {
            Ok(rss) => (cpu, rss, self.note),
            Err(e) => (cpu, 0, Some(format!("peak memory not measured: {e}"))),
        }
    }
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn peak_rss() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb << 10)
        .ok_or_else(|| io::Error::other("no VmHWM in /proc/self/status"))
}

/// dir_bytes is the space the files under dir take on disk, as du counts
/// it; what cannot be read counts as nothing.
pub fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let Ok(md) = e.metadata() else { continue };
        n += md.blocks() * 512;
        if md.is_dir() {
            n += dir_bytes(&e.path());
        }
    }
    n
}

/// drop_caches asks the kernel to drop the page cache, so that a catch-up
/// read comes from the disk, and says whether it did.
pub fn drop_caches() -> String {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() };
    match std::fs::write("/proc/sys/vm/drop_caches", "1") {
        Ok(()) => "page cache dropped before the read".to_string(),
        Err(e) => format!("page cache not dropped ({e}): the read may be served from memory"),
    }
}

/// write_table writes r as loadgen.WriteTable does: a right-aligned table,
/// then its first error and notes.
pub fn write_table(w: &mut impl Write, r: &Result) -> io::Result<()> {
    let l = &r.latency_us;
    let rows = [
        vec![
            "system",
            "variant",
            "workload",
            "MB/s",
            "entries/s",
            "p50",
            "p99",
            "p99.9",
            "max",
            "CPU s",
            "peak RSS",
            "errors",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>(),
        vec![
            r.system.clone(),
            r.variant.clone(),
            r.workload.clone(),
            format!("{:.1}", r.mb_per_s),
            format!("{:.0}", r.entries_per_s),
            micros(l.p50),
            micros(l.p99),
            micros(l.p999),
            micros(l.max),
            format!("{:.2}", r.cpu_s),
            mib(r.peak_rss_bytes),
            r.errors.to_string(),
        ],
    ];
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
                + 2
        })
        .collect();
    for row in &rows {
        for (cell, width) in row.iter().zip(&widths) {
            write!(w, "{:>1$}", cell, width)?;
        }
        writeln!(w)?;
    }
    let who = format!("{} {} {}", r.system, r.variant, r.workload);
    if !r.first_error.is_empty() {
        writeln!(w, "{who}: first error: {}", r.first_error)?;
    }
    for n in &r.notes {
        writeln!(w, "{who}: {n}")?;
    }
    Ok(())
}

/// micros formats a latency in microseconds as loadgen.Micros.
fn micros(us: f64) -> String {
    match us {
        0.0 => "-".to_string(),
        _ if us < 1000.0 => format!("{us:.0}µs"),
        _ if us < 10_000.0 => format!("{:.2}ms", us / 1e3),
        _ if us < 1e6 => format!("{:.1}ms", us / 1e3),
        _ => format!("{:.2}s", us / 1e6),
    }
}

fn mib(n: u64) -> String {
    if n == 0 {
        return "-".to_string();
    }
    format!("{:.0} MiB", n as f64 / (1u64 << 20) as f64)
}
