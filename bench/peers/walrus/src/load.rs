//! The appending side of a run, as loadgen's load (bench/loadgen/run.go):
//! producer threads on a schedule or in a closed loop, until a time or a
//! count, with latency from each append's intended start.

use crate::result::{self, ProcMeter, Result};
use crate::{Spec, Target};
use hdrhistogram::Histogram;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// DRAIN_TIMEOUT bounds the wait for appends still in flight when a timed
/// run ends, as loadgen's drainTimeout.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Load is the appending side of a run, as loadgen's load: producers on a
/// schedule or in a closed loop, until a time or a count.
pub struct Load {
    spec: Spec,
    t: Arc<Target>,
    /// Entries are windows on a pool of random bytes, each at a different
    /// place, so that no two neighbours are alike.
    pool: Vec<u8>,
    start: Instant,
    measure_from: Instant,
    /// None: until the count, however long.
    end: Option<Instant>,
    claimed: AtomicU64,
    hist: Mutex<Histogram<u64>>,
    entries: AtomicU64,
    bytes: AtomicU64,
    /// Nanoseconds from start to the last measured acknowledgement.
    last_done: AtomicU64,
    pub acked_all: AtomicU64,
    pub errs: AtomicU64,
    pub first_err: Mutex<Option<String>>,
}

impl Load {
    pub fn new(spec: Spec, t: Arc<Target>) -> std::result::Result<Arc<Load>, String> {
        if spec.in_flight > 0 {
            return Err(format!(
                "workload {:?} appends asynchronously, and walrus has no asynchronous append",
                spec.name
            ));
        }
        let mut pool = vec![0u8; (8 << 20).max(2 * spec.entry_bytes)];
        let mut x: u64 = 0x7465726e; // splitmix64
        for chunk in pool.chunks_mut(8) {
            x = x.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
        let now = Instant::now();
        Ok(Arc::new(Load {
            spec,
            t,
            pool,
            start: now,
            measure_from: now,
            end: None,
            claimed: AtomicU64::new(0),
            hist: Mutex::new(result::new_histogram()),
            entries: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            last_done: AtomicU64::new(0),
            acked_all: AtomicU64::new(0),
            errs: AtomicU64::new(0),
            first_err: Mutex::new(None),
        }))
    }

    /// run appends until the spec's duration is over or its count is
    /// reached, and waits for the producers (at most DRAIN_TIMEOUT after
    /// the end of a timed run).
    pub fn run(self: &mut Arc<Load>) {
        let l = Arc::get_mut(self).expect("a load runs once");
        l.start = Instant::now();
        // A count is measured whole, however short: no warm-up.
        l.measure_from = if l.spec.count > 0 { l.start } else { l.start + l.spec.warmup };
        l.end = (l.spec.count == 0).then(|| l.measure_from + l.spec.duration);
        let (done_tx, done_rx) = mpsc::channel::<()>();
        for p in 0..self.spec.producers {
            let (l, done) = (self.clone(), done_tx.clone());
            std::thread::spawn(move || {
                l.produce(p);
                let _ = done.send(());
            });
        }
        drop(done_tx);
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let progress = {
            let l = self.clone();
            std::thread::spawn(move || l.progress(stop_rx))
        };
        for _ in 0..self.spec.producers {
            let finished = match self.end {
                None => done_rx.recv().is_ok(),
                Some(end) => {
                    let deadline = end + DRAIN_TIMEOUT;
                    done_rx
                        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                        .is_ok()
                }
            };
            if !finished {
                self.fail(format!(
                    "appends still unacknowledged {} after the run ended",
                    go_duration(DRAIN_TIMEOUT)
                ));
                break;
            }
        }
        drop(stop_tx);
        let _ = progress.join();
    }

    fn produce(&self, p: usize) {
        let s = &self.spec;
        let log = p % s.logs;
        let interval = if s.rate > 0.0 {
            Duration::from_secs_f64(s.producers as f64 / s.rate)
        } else {
            Duration::ZERO
        };
        // Producers' schedules interleave rather than fire together.
        let offset = interval * p as u32 / s.producers as u32;
        let mut hist = result::new_histogram();
        let mut next = p as u64 * 7919;
        for i in 0u32.. {
            let mut n = s.batch;
            if s.count > 0 {
                let claimed = self.claimed.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
                let over = claimed.saturating_sub(s.count) as usize;
                if over >= n {
                    break;
                }
                n -= over;
            }
            let intended = if interval > Duration::ZERO {
                let intended = self.start + offset + interval * i;
                if self.end.is_some_and(|end| intended >= end) {
                    break;
                }
                std::thread::sleep(intended.saturating_duration_since(Instant::now()));
                intended
            } else {
                let now = Instant::now();
                if self.end.is_some_and(|end| now >= end) {
                    break;
                }
                now
            };
            let batch: Vec<&[u8]> = (0..n as u64).map(|j| self.entry(next + j)).collect();
            next += n as u64;
            let res = self.t.append(log, &batch);
            self.done(intended, &batch, res, &mut hist);
        }
        let _ = self.hist.lock().unwrap().add(&hist);
    }

    fn entry(&self, i: u64) -> &[u8] {
        let size = self.spec.entry_bytes;
        let off = (i.wrapping_mul(4099) % (self.pool.len() - size + 1) as u64) as usize;
        &self.pool[off..off + size]
    }

    fn done(
        &self,
        intended: Instant,
        entries: &[&[u8]],
        res: io::Result<()>,
        hist: &mut Histogram<u64>,
    ) {
        let now = Instant::now();
        if let Err(e) = res {
            self.fail(e.to_string());
            return;
        }
        self.acked_all
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        if intended < self.measure_from {
            return;
        }
        result::record(hist, now - intended);
        self.entries
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        self.bytes.fetch_add(
            entries.iter().map(|e| e.len() as u64).sum(),
            Ordering::Relaxed,
        );
        self.last_done
            .fetch_max((now - self.start).as_nanos() as u64, Ordering::Relaxed);
    }

    fn fail(&self, err: String) {
        self.errs.fetch_add(1, Ordering::Relaxed);
        self.first_err.lock().unwrap().get_or_insert(err);
    }

    /// finish fills in r from what the load measured.
    pub fn finish(&self, r: &mut Result, m: ProcMeter) {
        let (cpu, rss, note) = m.stop();
        (r.cpu_s, r.peak_rss_bytes) = (cpu, rss);
        r.notes.extend(note);
        r.entries = self.entries.load(Ordering::Relaxed);
        r.bytes = self.bytes.load(Ordering::Relaxed);
        let last = self.last_done.load(Ordering::Relaxed);
        if last > 0 {
            let last = self.start + Duration::from_nanos(last);
            r.seconds = last
                .saturating_duration_since(self.measure_from)
                .as_secs_f64();
        }
        (r.latency_us, r.percentiles) = result::summary(&self.hist.lock().unwrap());
        r.errors = self.errs.load(Ordering::Relaxed);
        r.first_error = self.first_err.lock().unwrap().clone().unwrap_or_default();
    }

    /// progress writes a line a second on standard error until stop is
    /// dropped.
    fn progress(&self, stop: mpsc::Receiver<()>) {
        let mut last = 0;
        let mut tick = self.start;
        loop {
            tick += Duration::from_secs(1);
            if stop.recv_timeout(tick.saturating_duration_since(Instant::now()))
                != Err(mpsc::RecvTimeoutError::Timeout)
            {
                return;
            }
            let n = self.acked_all.load(Ordering::Relaxed);
            let total = match self.end {
                Some(end) => go_duration(end - self.start),
                None => "until done".to_string(),
            };
            eprintln!(
                "{}: {} of {}: {} entries/s, {:.1} MB/s, {} errors",
                self.spec.name,
                go_duration(tick - self.start),
                total,
                n - last,
                (n - last) as f64 * self.spec.entry_bytes as f64 / 1e6,
                self.errs.load(Ordering::Relaxed)
            );
            last = n;
        }
    }
}

/// go_duration formats d rounded to the second as Go's Duration.String.
fn go_duration(d: Duration) -> String {
    let s = (d.as_millis() + 500) / 1000;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}
