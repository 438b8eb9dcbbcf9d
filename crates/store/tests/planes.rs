//! The planes: every operation through each asynchronous plane and engine (io_uring and the
//! thread pool, buffered and O_DIRECT), many operations in flight at once, range-lock order,
//! reads that never see half an atomic write, the latency injector, and the inline and null
//! planes' contracts.

mod common;

use common::{pattern, scratch, Failing, MIB};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{
    Buffers, Complete, Done, Engine, Failure, FilePlane, FileStore, InlinePlane, NullPlane, Op,
    Options, Plane, PoolPlane, RamStore, Source, Store,
};

/// What an operation ended with: its result, data-in and data-out.
type Answer = (Done, Vec<u8>, Vec<u8>);

/// The answers of one asynchronous plane, by operation id.
#[derive(Default)]
struct Answers {
    got: Mutex<HashMap<u64, Answer>>,
    arrived: Condvar,
    /// Ids handed out: operations submitted, or about to be ([`Async::submit`]).
    next_id: AtomicU64,
    answered: AtomicU64,
    /// The most operations the plane held at once: submitted and not answered, as each
    /// answer came (that one included).
    most_held: AtomicU64,
}

impl Answers {
    fn new() -> (Arc<Self>, Complete) {
        let answers = Arc::new(Answers::default());
        let a = answers.clone();
        let complete: Complete = Arc::new(move |id, done, data_in, data_out| {
            let held = a.next_id.load(Ordering::SeqCst) - a.answered.fetch_add(1, Ordering::SeqCst);
            a.most_held.fetch_max(held, Ordering::SeqCst);
            a.got.lock().insert(id, (done, data_in, data_out));
            a.arrived.notify_all();
        });
        (answers, complete)
    }

    /// The answer to `id`; 60 s is a hang, not a slow machine.
    fn wait(&self, id: u64) -> Answer {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = self.got.lock();
        loop {
            if let Some(answer) = got.remove(&id) {
                return answer;
            }
            assert!(
                !self.arrived.wait_until(&mut got, deadline).timed_out(),
                "no answer to operation {id}"
            );
        }
    }
}

/// An asynchronous plane under test and its answers.
struct Async {
    name: String,
    plane: Arc<dyn Plane>,
    answers: Arc<Answers>,
}

impl Async {
    fn submit(&self, op: Op, data_out: Vec<u8>) -> u64 {
        let id = self.answers.next_id.fetch_add(1, Ordering::SeqCst);
        let buffers = Buffers::Owned {
            data_in: Vec::with_capacity(4096),
            data_out,
        };
        assert!(
            self.plane.submit(id, op, buffers).is_none(),
            "{}",
            self.name
        );
        id
    }

    fn call(&self, op: Op, data_out: Vec<u8>) -> (Done, Vec<u8>) {
        let (done, data_in, _) = self.answers.wait(self.submit(op, data_out));
        (done, data_in)
    }

    fn ok(&self, op: Op, data_out: Vec<u8>) -> Vec<u8> {
        match self.call(op, data_out) {
            (Done::Ok, data_in) => data_in,
            (other, _) => panic!("{}: {other:?}", self.name),
        }
    }

    fn read(&self, offset: u64, len: u32) -> Vec<u8> {
        self.ok(Op::Read { offset, len }, Vec::new())
    }
}

fn write(offset: u64, len: u32, atomic: bool) -> Op {
    Op::Write {
        offset,
        len,
        durable: false,
        atomic,
    }
}

/// A file plane with `engine` over a new file, direct or not; `None` (said on stderr) where
/// the engine or O_DIRECT does not run here.
fn file_plane(
    dir: &tempfile::TempDir,
    engine: Engine,
    direct: bool,
    len: u64,
    options: Options,
) -> Option<Async> {
    let name = format!(
        "{engine:?}{}",
        if direct { " O_DIRECT" } else { " buffered" }
    );
    let path = dir.path().join(format!("{name}.img").replace(' ', "-"));
    let store = match direct {
        true => FileStore::open_direct(&path, Some(len), 512),
        false => FileStore::open(&path, Some(len)),
    };
    let store = match store {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("SKIPPED {name}: {e}");
            return None;
        }
    };
    let (answers, complete) = Answers::new();
    let options = Options { engine, ..options };
    match FilePlane::new(store, &options, complete) {
        Ok(plane) => {
            assert_eq!(plane.engine(), engine, "{name}");
            Some(Async {
                name,
                plane: Arc::new(plane),
                answers,
            })
        }
        Err(e) => {
            eprintln!("SKIPPED {name}: {e}");
            None
        }
    }
}

/// Every asynchronous plane there is here: the pool over RAM, and file planes on both
/// engines, buffered and direct.
fn async_planes(dir: &tempfile::TempDir, len: u64) -> Vec<Async> {
    let (answers, complete) = Answers::new();
    let ram = PoolPlane::new(
        Arc::new(RamStore::new(len).unwrap()),
        &Options::default(),
        complete,
    )
    .unwrap();
    let mut planes = vec![Async {
        name: "pool over RAM".into(),
        plane: Arc::new(ram),
        answers,
    }];
    for engine in [Engine::Uring, Engine::Pool] {
        for direct in [false, true] {
            planes.extend(file_plane(dir, engine, direct, len, Options::default()));
        }
    }
    planes
}

#[test]
fn every_operation_through_every_asynchronous_plane() {
    let dir = scratch();
    for p in async_planes(&dir, 8 * MIB) {
        let name = &p.name;
        let data = pattern(1, 64 << 10);
        p.ok(write(4096, 64 << 10, false), data.clone());
        assert_eq!(p.read(4096, 64 << 10), data, "{name}");
        let durable = Op::Write {
            offset: MIB,
            len: 8192,
            durable: true,
            atomic: true,
        };
        p.ok(durable, pattern(2, 8192));
        assert_eq!(p.read(MIB, 8192), pattern(2, 8192), "{name}");
        // ORWRITE, COMPARE AND WRITE, VERIFY.
        p.ok(write(0, 512, false), vec![0x0F; 512]);
        p.ok(
            Op::OrWrite {
                offset: 0,
                len: 512,
                durable: false,
            },
            vec![0x30; 512],
        );
        assert_eq!(p.read(0, 512), [0x3F; 512], "{name}");
        let mut caw = vec![0x3F; 512];
        caw.extend([0x77; 512]);
        p.ok(
            Op::CompareAndWrite {
                offset: 0,
                len: 512,
                durable: true,
            },
            caw.clone(),
        );
        match p
            .call(
                Op::CompareAndWrite {
                    offset: 0,
                    len: 512,
                    durable: false,
                },
                caw,
            )
            .0
        {
            Done::Miscompare(0) => {}
            other => panic!("{name}: {other:?}"),
        }
        p.ok(
            Op::Compare {
                offset: 0,
                len: 512,
                block: 0,
            },
            vec![0x77; 512],
        );
        // WRITE SAME, then VERIFY of one block against all of them.
        let same = Op::WriteSame {
            offset: 2 * MIB,
            len: MIB,
            block: 512,
            zeros: false,
            durable: false,
        };
        p.ok(same, pattern(3, 512));
        p.ok(
            Op::Compare {
                offset: 2 * MIB,
                len: MIB as u32,
                block: 512,
            },
            pattern(3, 512),
        );
        // A sanitize step, an unmap, and what GET LBA STATUS and the usage say.
        let fill = Op::Fill {
            offset: 4 * MIB,
            len: MIB,
            pattern: Arc::from(pattern(4, 4096)),
            durable: true,
        };
        p.ok(fill, Vec::new());
        assert_eq!(p.read(4 * MIB + 4096, 4096), pattern(4, 4096), "{name}");
        p.ok(
            Op::Unmap {
                ranges: vec![(2 * MIB, MIB)],
                durable: true,
            },
            Vec::new(),
        );
        assert_eq!(p.read(2 * MIB, 4096), [0; 4096], "{name}");
        match p
            .call(
                Op::Extents {
                    offset: 2 * MIB,
                    len: 3 * MIB,
                    max: 4,
                },
                Vec::new(),
            )
            .0
        {
            Done::Extents(runs) => assert_eq!(runs, [(false, 2 * MIB), (true, MIB)], "{name}"),
            other => panic!("{name}: {other:?}"),
        }
        match p.call(Op::Usage, Vec::new()).0 {
            Done::Usage(Some(bytes)) => assert!(bytes >= MIB, "{name}: {bytes}"),
            other => panic!("{name}: {other:?}"),
        }
        p.ok(Op::Flush, Vec::new());
        // A copy within the store, overlapping, and one from another logical unit.
        let copy = Op::Copy {
            source: Source::This,
            destination: Source::This,
            from: 4096,
            to: 8192,
            len: 64 << 10,
            durable: true,
        };
        p.ok(copy, Vec::new());
        assert_eq!(p.read(8192, 64 << 10), data, "{name}");
        let other = Arc::new(RamStore::new(MIB).unwrap());
        other.write_at(0, &pattern(5, 4096)).unwrap();
        let source = Source::Other(Arc::new(InlinePlane::new(other)));
        p.ok(
            Op::Copy {
                source,
                destination: Source::This,
                from: 0,
                to: 6 * MIB,
                len: 4096,
                durable: false,
            },
            Vec::new(),
        );
        assert_eq!(p.read(6 * MIB, 4096), pattern(5, 4096), "{name}");
        // Ends, zero lengths, short buffers: answered, never a panic.
        assert!(p.read(8 * MIB, 0).is_empty(), "{name}");
        p.ok(write(8 * MIB, 0, true), Vec::new());
        let last = p.read(8 * MIB - 512, 512);
        assert_eq!(last.len(), 512, "{name}");
        for (op, data_out) in [
            (
                Op::Read {
                    offset: 8 * MIB - 512,
                    len: 1024,
                },
                vec![],
            ),
            (write(8 * MIB, 512, false), vec![0; 512]),
            (write(0, 1024, false), vec![0; 1000]),
        ] {
            match p.call(op, data_out).0 {
                Done::Failed(f) => assert_eq!(f.error().kind(), io::ErrorKind::InvalidInput),
                other => panic!("{name}: {other:?}"),
            }
        }
        let geometry = p.plane.geometry();
        assert_eq!(geometry.capacity, 8 * MIB, "{name}");
        assert!(geometry.tells_allocation, "{name}");
        assert!(!p.plane.is_inline(), "{name}");
        let mut now = vec![0; 4096];
        p.plane.read_now(6 * MIB, &mut now).unwrap();
        assert_eq!(now, pattern(5, 4096), "{name}");
    }
}

#[test]
fn io_uring_runs_here_or_says_why_not() {
    let dir = scratch();
    let store = Arc::new(FileStore::open(&dir.path().join("probe.img"), Some(MIB)).unwrap());
    let (_answers, complete) = Answers::new();
    let plane = FilePlane::new(store, &Options::default(), complete).unwrap();
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled");
    eprintln!(
        "engine here: {:?} (kernel.io_uring_disabled = {})",
        plane.engine(),
        disabled.as_deref().map_or("absent", str::trim)
    );
}

#[test]
fn borrowed_buffers_are_answered_at_once_owned_ones_refused_inline() {
    let dir = scratch();
    for p in async_planes(&dir, MIB) {
        let (mut data_in, data_out) = (Vec::new(), pattern(6, 4096));
        let borrowed = Buffers::Borrowed {
            data_in: &mut data_in,
            data_out: &data_out,
        };
        let done = p.plane.submit(u64::MAX, write(0, 4096, true), borrowed);
        assert!(matches!(done, Some(Done::Ok)), "{}: {done:?}", p.name);
        let borrowed = Buffers::Borrowed {
            data_in: &mut data_in,
            data_out: &[],
        };
        let done = p.plane.submit(
            u64::MAX,
            Op::Read {
                offset: 0,
                len: 4096,
            },
            borrowed,
        );
        assert!(matches!(done, Some(Done::Ok)), "{}", p.name);
        assert_eq!(data_in, data_out, "{}", p.name);
    }
    let inline = InlinePlane::new(Arc::new(RamStore::new(MIB).unwrap()));
    assert!(inline.is_inline());
    let owned = Buffers::Owned {
        data_in: vec![],
        data_out: vec![1; 512],
    };
    match inline.submit(1, write(0, 512, false), owned) {
        Some(Done::Failed(Failure::Write { error, .. })) => {
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_null_plane_answers_everything_and_touches_nothing() {
    let plane = NullPlane::new(1 << 40);
    assert!(plane.is_inline());
    assert_eq!(plane.geometry().capacity, 1 << 40);
    let (mut data_in, data_out) = (vec![1, 2, 3], vec![4; 512]);
    for op in [
        Op::Read {
            offset: 0,
            len: 4096,
        },
        write(1 << 39, 512, true),
        Op::CompareAndWrite {
            offset: 0,
            len: 512,
            durable: false,
        },
        Op::Flush,
    ] {
        let b = Buffers::Borrowed {
            data_in: &mut data_in,
            data_out: &data_out,
        };
        assert!(matches!(plane.submit(0, op, b), Some(Done::Ok)));
    }
    let b = Buffers::Borrowed {
        data_in: &mut data_in,
        data_out: &data_out,
    };
    let extents = plane.submit(
        0,
        Op::Extents {
            offset: 512,
            len: 4096,
            max: 1,
        },
        b,
    );
    assert!(matches!(extents, Some(Done::Extents(runs)) if runs == [(true, 4096)]));
    let b = Buffers::Borrowed {
        data_in: &mut data_in,
        data_out: &data_out,
    };
    assert!(matches!(
        plane.submit(0, Op::Usage, b),
        Some(Done::Usage(None))
    ));
    assert_eq!(data_in, [1, 2, 3]);
    let mut buf = [9; 8];
    plane.read_now(0, &mut buf).unwrap();
    assert_eq!(buf, [9; 8]);
}

/// A RAM store whose reads wait until `want` of them are inside it at once (or 30 s pass),
/// and that counts the most that ever were.
struct Rendezvous {
    inner: RamStore,
    want: usize,
    inside: Mutex<usize>,
    all_in: Condvar,
    most: AtomicUsize,
}

impl Store for Rendezvous {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut inside = self.inside.lock();
        *inside += 1;
        self.most.fetch_max(*inside, Ordering::SeqCst);
        self.all_in.notify_all();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.most.load(Ordering::SeqCst) < self.want {
            if self.all_in.wait_until(&mut inside, deadline).timed_out() {
                break;
            }
        }
        *inside -= 1;
        drop(inside);
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, buf)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The pool runs as many operations at once as it has threads: eight reads submitted from
/// one thread are inside the store together (each waits until all are), with no clock in
/// the verdict.
#[test]
fn the_pool_has_many_operations_in_the_store_at_once() {
    const QD: usize = 8;
    let store = Arc::new(Rendezvous {
        inner: RamStore::new(MIB).unwrap(),
        want: QD,
        inside: Mutex::new(0),
        all_in: Condvar::new(),
        most: AtomicUsize::new(0),
    });
    let (answers, complete) = Answers::new();
    let options = Options {
        threads: QD,
        ..Options::default()
    };
    let plane = PoolPlane::new(store.clone(), &options, complete).unwrap();
    let p = Async {
        name: "pool".into(),
        plane: Arc::new(plane),
        answers,
    };
    let ids: Vec<u64> = (0..QD as u64)
        .map(|i| {
            p.submit(
                Op::Read {
                    offset: i * 4096,
                    len: 4096,
                },
                Vec::new(),
            )
        })
        .collect();
    for id in ids {
        assert!(matches!(p.answers.wait(id).0, Done::Ok));
    }
    assert_eq!(
        store.most.load(Ordering::SeqCst),
        QD,
        "reads in the store at once"
    );
}

/// With the latency injector, io_uring keeps a whole queue in flight: 64 reads submitted at
/// once are all outstanding together (the first answer comes after the last submission), so
/// the lot takes about one delay, not 64.
#[test]
fn io_uring_keeps_a_queue_in_flight_behind_the_injected_latency() {
    const QD: u64 = 64;
    let delay = Duration::from_millis(300);
    let dir = scratch();
    let options = Options {
        delay: Some(delay),
        ..Options::default()
    };
    let Some(p) = file_plane(&dir, Engine::Uring, false, MIB, options) else {
        return;
    };
    let submitted = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let ids: Vec<u64> = (0..QD)
        .map(|i| {
            let id = p.submit(
                Op::Read {
                    offset: i * 4096,
                    len: 4096,
                },
                Vec::new(),
            );
            submitted.fetch_add(1, Ordering::SeqCst);
            id
        })
        .collect();
    let submitting = start.elapsed();
    let mut first = None;
    for id in ids {
        assert!(matches!(p.answers.wait(id).0, Done::Ok));
        first.get_or_insert(submitted.load(Ordering::SeqCst));
    }
    let elapsed = start.elapsed();
    assert!(submitting < delay, "submitting took {submitting:?}");
    assert_eq!(
        first,
        Some(QD),
        "all were submitted before any was answered"
    );
    assert!(
        elapsed >= delay,
        "{elapsed:?}: the injector holds answers back"
    );
    assert!(
        elapsed < 8 * delay,
        "{elapsed:?} for {QD} reads of {delay:?}"
    );
}

/// The queue depth reaches a file plane whose completions take 20 ms (a store slower than
/// the CPU): in a closed loop at QD 8 the plane holds about eight operations at once, where
/// a path that ran each on the submitting thread (a connection's, before the asynchronous
/// planes) would hold one. Counted, not timed: each answer sees how many operations were
/// submitted and not yet answered. QD 1 holds one, which checks the count.
#[test]
fn the_queue_depth_reaches_a_slow_store() {
    let dir = scratch();
    for engine in [Engine::Uring, Engine::Pool] {
        let options = Options {
            delay: Some(Duration::from_millis(20)),
            ..Options::default()
        };
        let Some(p) = file_plane(&dir, engine, false, MIB, options) else {
            continue;
        };
        // The most held at once in a closed loop of `qd` until 5 × `qd` answers came.
        let most_held = |qd: u64| {
            p.answers.most_held.store(0, Ordering::SeqCst);
            let read = |i: u64| {
                p.submit(
                    Op::Read {
                        offset: i % 16 * 4096,
                        len: 4096,
                    },
                    Vec::new(),
                )
            };
            let mut outstanding: std::collections::VecDeque<u64> = (0..qd).map(read).collect();
            for i in qd..5 * qd {
                let id = outstanding.pop_front().expect("a closed loop");
                assert!(matches!(p.answers.wait(id).0, Done::Ok), "{}", p.name);
                outstanding.push_back(read(i));
            }
            for id in outstanding {
                assert!(matches!(p.answers.wait(id).0, Done::Ok), "{}", p.name);
            }
            p.answers.most_held.load(Ordering::SeqCst)
        };
        let (one, eight) = (most_held(1), most_held(8));
        eprintln!("{}: {one} held at once at QD 1, {eight} at QD 8", p.name);
        assert_eq!(one, 1, "{}", p.name);
        assert!(eight >= 4, "{}: {eight} held at once at QD 8", p.name);
    }
}

/// A RAM store whose writes at offset 0 wait for a gate, and that logs the writes it starts
/// and finishes.
struct Gated {
    inner: RamStore,
    open: Mutex<bool>,
    opened: Condvar,
    log: Mutex<Vec<(&'static str, u8)>>,
}

impl Store for Gated {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.log.lock().push(("start", buf[0]));
        self.opened.notify_all();
        if offset == 0 {
            let mut open = self.open.lock();
            while !*open {
                self.opened.wait(&mut open);
            }
        }
        self.inner.write_at(offset, buf)?;
        self.log.lock().push(("end", buf[0]));
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}

/// A write keeps its range until the store has finished it: a later overlapping write waits
/// in the range lock (it never reaches the store first), a disjoint one does not wait.
#[test]
fn a_write_holds_its_range_until_the_store_has_finished() {
    let store = Arc::new(Gated {
        inner: RamStore::new(MIB).unwrap(),
        open: Mutex::new(false),
        opened: Condvar::new(),
        log: Mutex::default(),
    });
    let (answers, complete) = Answers::new();
    let plane = PoolPlane::new(store.clone(), &Options::default(), complete).unwrap();
    let lock = plane.range_lock().clone();
    let p = Async {
        name: "gated".into(),
        plane: Arc::new(plane),
        answers,
    };
    let first = p.submit(write(0, 4096, false), vec![1; 4096]);
    {
        let mut log = store.log.lock();
        while log.is_empty() {
            store.opened.wait(&mut log);
        }
    }
    let second = p.submit(write(2048, 4096, false), vec![2; 4096]);
    assert_eq!(
        lock.waiting(),
        1,
        "the overlapping write waits for its range"
    );
    let disjoint = p.submit(write(8192, 512, false), vec![3; 512]);
    assert!(
        matches!(p.answers.wait(disjoint).0, Done::Ok),
        "disjoint: no wait"
    );
    assert_eq!(lock.waiting(), 1);
    *store.open.lock() = true;
    store.opened.notify_all();
    assert!(matches!(p.answers.wait(first).0, Done::Ok));
    assert!(matches!(p.answers.wait(second).0, Done::Ok));
    let log = store.log.lock().clone();
    let at = |entry| log.iter().position(|&e| e == entry).unwrap();
    assert!(at(("end", 1)) < at(("start", 2)), "{log:?}");
    let mut back = vec![0; 6144];
    store.read_at(0, &mut back).unwrap();
    assert_eq!(&back[..2048], [1; 2048]);
    assert_eq!(&back[2048..], [2; 4096]);
}

/// Overlapping writes through io_uring land in the order they were submitted: each waits
/// for the one before it to leave the kernel, so the medium holds the last one's bytes
/// wherever it wrote.
#[test]
fn overlapping_writes_through_io_uring_land_in_submission_order() {
    let dir = scratch();
    for direct in [false, true] {
        let Some(p) = file_plane(&dir, Engine::Uring, direct, MIB, Options::default()) else {
            continue;
        };
        let ids: Vec<u64> = (0..64u8)
            .map(|i| {
                let offset = u64::from(i % 4) * 512;
                p.submit(write(offset, 8192, false), vec![i + 1; 8192])
            })
            .collect();
        for id in ids {
            assert!(matches!(p.answers.wait(id).0, Done::Ok));
        }
        let back = p.read(0, 8192 + 1536);
        for (at, fill) in [(0, 61), (512, 62), (1024, 63)] {
            assert_eq!(back[at..at + 512], [fill; 512], "{} at {at}", p.name);
        }
        assert_eq!(back[1536..], [64; 8192], "{}", p.name);
    }
}

/// Reads concurrent with WRITE ATOMICs of the same 2 MiB see one write's data whole, never
/// half of each (SBC-4 §4.29.2), on every asynchronous plane: a closed loop of atomic writes
/// of two patterns against a queue of reads.
#[test]
fn reads_never_see_half_an_atomic_write() {
    const LEN: u32 = 2 << 20;
    let dir = scratch();
    for p in async_planes(&dir, 4 * MIB) {
        let p = Arc::new(p);
        let atomic = |fill: u8| {
            let op = Op::Write {
                offset: 512,
                len: LEN,
                durable: false,
                atomic: true,
            };
            (op, vec![fill; LEN as usize])
        };
        let (op, data) = atomic(0xAA);
        p.ok(op, data);
        let writing = AtomicBool::new(true);
        let reads = AtomicUsize::new(0);
        let (writes, mixed) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut mixed = 0;
                while writing.load(Ordering::SeqCst) {
                    let ids: Vec<u64> = (0..4)
                        .map(|_| {
                            p.submit(
                                Op::Read {
                                    offset: 512,
                                    len: LEN,
                                },
                                Vec::new(),
                            )
                        })
                        .collect();
                    for id in ids {
                        let (done, data, _) = p.answers.wait(id);
                        assert!(matches!(done, Done::Ok), "{}: {done:?}", p.name);
                        reads.fetch_add(1, Ordering::SeqCst);
                        if !data.iter().all(|&b| b == data[0]) {
                            mixed += 1;
                        }
                    }
                }
                mixed
            });
            // At least 100 writes, and on until 100 reads have run against them.
            let mut writes = 0;
            while writes < 100 || reads.load(Ordering::SeqCst) < 100 {
                let (op, data) = atomic(if writes % 2 == 0 { 0x55 } else { 0xAA });
                p.ok(op, data);
                writes += 1;
            }
            writing.store(false, Ordering::SeqCst);
            (writes, reader.join().unwrap())
        });
        let reads = reads.into_inner();
        eprintln!("{}: {reads} reads against {writes} atomic writes", p.name);
        assert_eq!(
            mixed, 0,
            "{}: {mixed} of {reads} reads saw two writes",
            p.name
        );
    }
}

/// A failing store fails the step that failed, through the pool too.
#[test]
fn a_failing_store_fails_asynchronous_operations() {
    let store = Arc::new(Failing::new(MIB));
    let (answers, complete) = Answers::new();
    let plane = PoolPlane::new(store.clone(), &Options::default(), complete).unwrap();
    let p = Async {
        name: "failing".into(),
        plane: Arc::new(plane),
        answers,
    };
    store.fail_reads.store(true, Ordering::SeqCst);
    let (done, data_in) = p.call(
        Op::Read {
            offset: 512,
            len: 512,
        },
        Vec::new(),
    );
    assert!(matches!(
        done,
        Done::Failed(Failure::Read { at: Some(512), .. })
    ));
    assert!(data_in.is_empty());
    store.fail_reads.store(false, Ordering::SeqCst);
    store.fail_writes.store(true, Ordering::SeqCst);
    let (done, _) = p.call(write(512, 512, true), vec![0; 512]);
    assert!(matches!(
        done,
        Done::Failed(Failure::Write { at: Some(512), .. })
    ));
    let (done, _) = p.call(Op::Flush, Vec::new());
    assert!(matches!(
        done,
        Done::Failed(Failure::Write { at: None, .. })
    ));
}

/// A plane dropped with operations in flight still answers every one.
#[test]
fn a_dropped_plane_answers_what_it_had_started() {
    let dir = scratch();
    for engine in [Engine::Uring, Engine::Pool] {
        let options = Options {
            delay: Some(Duration::from_millis(50)),
            ..Options::default()
        };
        let Some(p) = file_plane(&dir, engine, false, MIB, options) else {
            continue;
        };
        let ids: Vec<u64> = (0..32)
            .map(|i| p.submit(write(i * 4096, 4096, i % 2 == 0), vec![1; 4096]))
            .collect();
        let Async { plane, answers, .. } = p;
        drop(plane);
        for id in ids {
            assert!(matches!(answers.wait(id).0, Done::Ok));
        }
    }
}

/// O_DIRECT: refused with a reason where the file system cannot (tmpfs before Linux 6.6),
/// and every access not in whole blocks is an error, not a panic.
#[test]
fn direct_io_is_checked_and_misaligned_access_refused() {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        let tmp = tempfile::tempdir_in(shm).unwrap();
        match FileStore::open_direct(&tmp.path().join("lun.img"), Some(MIB), 512) {
            Ok(_) => eprintln!("tmpfs at /dev/shm takes O_DIRECT here"),
            Err(e) => eprintln!("tmpfs at /dev/shm refuses O_DIRECT here: {e}"),
        }
    }
    let dir = scratch();
    let path = dir.path().join("direct.img");
    let e = FileStore::open_direct(&path, Some(MIB), 0).err().unwrap();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let store = match FileStore::open_direct(&path, Some(MIB), 512) {
        Ok(s) => s,
        Err(e) => return eprintln!("SKIPPED: no O_DIRECT on the target directory: {e}"),
    };
    assert_eq!(store.direct_block(), Some(512));
    let mut buf = vec![0; 512];
    assert!(store.read_at(100, &mut buf).is_err());
    assert!(store.write_at(512, &buf[..100]).is_err());
    store.write_at(512, &pattern(7, 512)).unwrap();
    store.read_at(512, &mut buf).unwrap();
    assert_eq!(buf, pattern(7, 512));
    drop(store);
    for engine in [Engine::Uring, Engine::Pool] {
        let Some(p) = file_plane(&dir, engine, true, MIB, Options::default()) else {
            continue;
        };
        match p.call(write(100, 512, false), vec![0; 512]).0 {
            Done::Failed(Failure::Write { .. }) => {}
            other => panic!("{}: {other:?}", p.name),
        }
        match p.call(
            Op::Read {
                offset: 512,
                len: 100,
            },
            Vec::new(),
        ) {
            (Done::Failed(Failure::Read { .. }), data_in) => assert!(data_in.is_empty()),
            other => panic!("{}: {other:?}", p.name),
        }
    }
}

/// A completion handler that panics loses its own answer; the plane goes on answering.
#[test]
fn a_panicking_handler_loses_only_its_own_answer() {
    let dir = scratch();
    for engine in [Engine::Uring, Engine::Pool] {
        let path = dir.path().join(format!("panics-{engine:?}.img"));
        let store = Arc::new(FileStore::open(&path, Some(MIB)).unwrap());
        let (answers, inner) = Answers::new();
        let complete: Complete = Arc::new(move |id, done, data_in, data_out| {
            assert_ne!(id, 0, "the handler's own bug");
            inner(id, done, data_in, data_out)
        });
        let options = Options {
            engine,
            threads: 1,
            ..Options::default()
        };
        let Ok(plane) = FilePlane::new(store, &options, complete) else {
            continue;
        };
        let p = Async {
            name: format!("{engine:?}"),
            plane: Arc::new(plane),
            answers,
        };
        // Atomic: the read after it waits for it (its answer never comes).
        p.submit(write(0, 512, true), vec![1; 512]);
        assert_eq!(p.read(0, 512), [1; 512], "{}", p.name);
    }
}

/// A read whose pages the page cache holds ends on the caller's thread (`try_now`), with the
/// bytes the file holds; one the cache cannot answer, a direct plane's, and any other
/// operation go to the plane.
#[test]
fn cached_reads_end_at_once_the_rest_is_submitted() {
    let dir = tempfile::tempdir().unwrap();
    let Some(buffered) = file_plane(&dir, Engine::Pool, false, 1 << 20, Options::default()) else {
        return;
    };
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
    let id = buffered.submit(write(4096, 8192, false), data.clone());
    assert!(matches!(buffered.answers.wait(id).0, Done::Ok));
    let mut data_in = vec![9];
    let read = Op::Read {
        offset: 4096,
        len: 8192,
    };
    match buffered.plane.try_now(&read, &mut data_in) {
        // Written through the page cache: there it is (a file system without RWF_NOWAIT,
        // such as tmpfs, says None and the read is submitted).
        Some(Done::Ok) => assert_eq!(data_in[1..], data[..]),
        None => assert_eq!(data_in, [9]),
        Some(other) => panic!("{other:?}"),
    }
    assert!(buffered.plane.try_now(&Op::Flush, &mut data_in).is_none());
    let past = Op::Read {
        offset: 1 << 20,
        len: 512,
    };
    let before = data_in.len();
    assert!(buffered.plane.try_now(&past, &mut data_in).is_none());
    assert_eq!(
        data_in.len(),
        before,
        "a refused read leaves the buffer as it was"
    );
    if let Some(direct) = file_plane(&dir, Engine::Pool, true, 1 << 20, Options::default()) {
        assert!(direct.plane.try_now(&read, &mut data_in).is_none());
    }
    let delayed = Options {
        delay: Some(Duration::from_millis(1)),
        ..Options::default()
    };
    let dir2 = tempfile::tempdir().unwrap();
    if let Some(slow) = file_plane(&dir2, Engine::Pool, false, 1 << 20, delayed) {
        assert!(
            slow.plane.try_now(&read, &mut data_in).is_none(),
            "a delayed plane delays every operation"
        );
    }
}

/// A file on tmpfs is memory; one on the tests' temporary directory is memory only when that
/// is tmpfs too, and a direct one never.
#[test]
fn a_file_on_tmpfs_is_in_memory() {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        let dir = tempfile::tempdir_in(shm).unwrap();
        let store = FileStore::open(&dir.path().join("lun.img"), Some(1 << 20)).unwrap();
        assert!(store.in_memory());
    }
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(&dir.path().join("lun.img"), Some(1 << 20)).unwrap();
    let tmpfs = std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f.len() > 2 && dir.path().starts_with(f[1]) && f[1] != "/" && f[2] == "tmpfs"
        });
    assert_eq!(store.in_memory(), tmpfs);
}

/// Waits (at most 10 s) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A shrink (`Plane::resize`, issue 22) on every asynchronous plane, while a change holds a
/// range it cuts: it waits for that change; a write checked against the old end before the
/// cut and waiting behind it for its range fails, and lands nowhere (a file is not extended
/// past its new end, by io_uring or the pool); writes below the new end go on meanwhile.
#[test]
fn a_shrink_waits_for_changes_in_flight_and_fails_those_that_waited() {
    let dir = scratch();
    let (answers, complete) = Answers::new();
    let ram = PoolPlane::new(
        Arc::new(RamStore::new(2 * MIB).unwrap()),
        &Options::default(),
        complete,
    )
    .unwrap();
    let mut planes = vec![(ram.range_lock().clone(), None, "pool over RAM".to_string())];
    let mut asyncs = vec![Async {
        name: planes[0].2.clone(),
        plane: Arc::new(ram),
        answers,
    }];
    for engine in [Engine::Uring, Engine::Pool] {
        let path = dir.path().join(format!("shrink-{engine:?}.img"));
        let store = Arc::new(FileStore::open(&path, Some(2 * MIB)).unwrap());
        let (answers, complete) = Answers::new();
        let options = Options {
            engine,
            ..Options::default()
        };
        let plane = match FilePlane::new(store, &options, complete) {
            Ok(plane) => plane,
            Err(e) => {
                eprintln!("SKIPPED {engine:?}: {e}");
                continue;
            }
        };
        planes.push((
            plane.range_lock().clone(),
            Some(path),
            format!("{engine:?}"),
        ));
        asyncs.push(Async {
            name: format!("{engine:?}"),
            plane: Arc::new(plane),
            answers,
        });
    }
    for ((lock, path, name), p) in planes.into_iter().zip(asyncs) {
        p.ok(write(MIB, 4096, false), vec![4; 4096]);
        let held = lock.lock(MIB, 4096, false);
        let plane = p.plane.clone();
        let shrink = std::thread::spawn(move || plane.resize(Some(MIB)));
        wait_until("the shrink waits", || lock.waiting() == 1);
        let late = p.submit(write(MIB + 512, 4096, false), vec![5; 4096]);
        wait_until("the late write waits", || lock.waiting() == 2);
        p.ok(write(0, 4096, false), vec![6; 4096]);
        drop(held);
        assert_eq!(shrink.join().unwrap().unwrap(), MIB, "{name}");
        match p.answers.wait(late).0 {
            Done::Failed(Failure::Write { error, .. }) => {
                assert!(
                    error.to_string().contains("beyond the store"),
                    "{name}: {error}"
                )
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(p.plane.geometry().capacity, MIB, "{name}");
        if let Some(path) = &path {
            assert_eq!(std::fs::metadata(path).unwrap().len(), MIB, "{name}");
        }
        assert!(matches!(
            p.call(
                Op::Read {
                    offset: MIB,
                    len: 512
                },
                Vec::new()
            )
            .0,
            Done::Failed(_)
        ));
        // Grown back, the cut bytes read zero and the kept ones as written.
        assert_eq!(p.plane.resize(Some(2 * MIB)).unwrap(), 2 * MIB, "{name}");
        assert!(p.read(MIB, 8192).iter().all(|&b| b == 0), "{name}");
        assert_eq!(p.read(0, 4096), vec![6; 4096], "{name}");
    }
}
