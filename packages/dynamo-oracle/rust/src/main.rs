//! The Dynamo oracle (`@vantage/dynamo-oracle`). Its timed mode, for `npm run bench:index`, replays the event streams that benchmark wrote
//! (one file per scenario, format in `read_events`) into three of Dynamo's indexers from the
//! published `dynamo-kv-router` crate, each on this one thread, and prints one JSON line.
//!
//! Timing mirrors the TypeScript benchmark: the events are decoded into `RouterEvent`s before
//! timing, each pass applies them to a fresh indexer, 2 untimed passes then `reps` timed ones,
//! and the figure is block operations (blocks stored plus blocks removed) per second of process
//! CPU time (user + system) over the apply loop. Building each pass's event vector (a clone of
//! the decoded events) and dropping the indexer afterwards are outside the timed region.

use std::fs;
use std::time::Instant;

use dynamo_kv_router::concurrent_radix_tree_compressed::ConcurrentRadixTreeCompressed;
use dynamo_kv_router::indexer::positional::{LevelIndex, PositionalIndexer};
use dynamo_kv_router::indexer::{SyncIndexer, WorkerTask};
use dynamo_kv_router::protocols::{
    compute_block_hash_for_seq, compute_seq_hash_for_block, ActiveLoad, ActiveSequenceEvent, ActiveSequenceEventBatch,
    ActiveSequenceEventData, BlockHashOptions, ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData,
    KvCacheRemoveData, KvCacheStoreData, KvCacheStoredBlockData, LocalBlockHash, PrefillLoadHint, RouterEvent,
    StorageTier, WorkerWithDpRank,
};
use dynamo_kv_router::RadixTree;
use rustc_hash::FxHashMap;

fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass it and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = self
            .b
            .get(self.at..self.at + n)
            .unwrap_or_else(|| panic!("truncated event file at byte {}", self.at));
        self.at += n;
        s
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
}

/// A worker leaving the pool (not a KV event): every dp rank of it, or one.
enum Leave {
    Worker(u64),
    DpRank(u64, u32),
}

/// File layout (little-endian): "VEV1", u32 record count; then per record: u8 kind (1 stored,
/// 2 removed, 3 cleared; 4 worker removed, 5 dp rank removed), u8 tier (0 device, 1 host_pinned,
/// 2 disk, 3 external), u8 has-parent, u8 0, u32 dp rank, u64 worker id, u64 event id, u64 parent
/// hash (0 when absent), u32 block count, then per block: stored u64 block hash and u64 tokens
/// hash; removed u64 block hash. Returns the events, their block operations, and each removal of a
/// worker or dp rank with the number of events before it.
fn read_events(path: &str) -> (Vec<RouterEvent>, u64, Vec<(usize, Leave)>) {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut r = Reader { b: &bytes, at: 0 };
    assert_eq!(r.take(4), b"VEV1", "{path}: not an event file");
    let n = r.u32() as usize;
    let mut out = Vec::with_capacity(n);
    let mut leaves = Vec::new();
    let mut ops = 0u64;
    for _ in 0..n {
        let kind = r.u8();
        let tier = match r.u8() {
            0 => StorageTier::Device,
            1 => StorageTier::HostPinned,
            2 => StorageTier::Disk,
            3 => StorageTier::External,
            t => panic!("{path}: tier {t}"),
        };
        let has_parent = r.u8() != 0;
        r.u8();
        let dp_rank = r.u32();
        let worker_id = r.u64();
        let event_id = r.u64();
        let parent = r.u64();
        let count = r.u32() as usize;
        let data = match kind {
            1 => {
                let mut blocks = Vec::with_capacity(count);
                for _ in 0..count {
                    let block_hash = ExternalSequenceBlockHash(r.u64());
                    let tokens_hash = LocalBlockHash(r.u64());
                    blocks.push(KvCacheStoredBlockData {
                        block_hash,
                        tokens_hash,
                        mm_extra_info: None,
                    });
                }
                ops += count as u64;
                KvCacheEventData::Stored(KvCacheStoreData {
                    parent_hash: has_parent.then_some(ExternalSequenceBlockHash(parent)),
                    start_position: None,
                    blocks,
                })
            }
            2 => {
                let block_hashes = (0..count).map(|_| ExternalSequenceBlockHash(r.u64())).collect();
                ops += count as u64;
                KvCacheEventData::Removed(KvCacheRemoveData { block_hashes })
            }
            3 => KvCacheEventData::Cleared,
            4 | 5 => {
                assert_eq!(count, 0, "{path}: a worker removal has no blocks");
                let leave = if kind == 4 {
                    Leave::Worker(worker_id)
                } else {
                    Leave::DpRank(worker_id, dp_rank)
                };
                leaves.push((out.len(), leave));
                continue;
            }
            k => panic!("{path}: event kind {k}"),
        };
        let event = KvCacheEvent {
            event_id,
            data,
            dp_rank,
        };
        out.push(RouterEvent::with_storage_tier(worker_id, event, tier));
    }
    assert_eq!(r.at, bytes.len(), "{path}: trailing bytes");
    (out, ops, leaves)
}

/// Minor page faults of this process so far (first touches of memory from the system).
fn minor_faults() -> i64 {
    // SAFETY: getrusage writes the rusage struct we pass it and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_minflt as i64
}

/// One implementation's passes.
struct Passes<T> {
    /// CPU and wall seconds of the timed passes.
    cpu: Vec<f64>,
    wall: Vec<f64>,
    /// Every pass, untimed ones first: CPU seconds and page faults.
    all_cpu: Vec<f64>,
    all_faults: Vec<i64>,
    /// Events the last pass rejected.
    failed: u64,
    /// The last pass's indexer (dropped by the caller, outside any timed region).
    last: T,
}

/// `make` builds an empty indexer, `apply` consumes the events and returns how many it rejected:
/// 2 untimed passes, then `reps` timed ones. The first pass of the first implementation a process
/// runs takes its memory fresh from the system, as every pass of ours does; later passes reuse
/// what the allocator got back from the previous indexer.
fn time_passes<T>(
    events: &[RouterEvent],
    reps: usize,
    make: impl Fn() -> T,
    apply: impl Fn(&mut T, Vec<RouterEvent>) -> u64,
) -> Passes<T> {
    let (mut cpu, mut wall, mut all_cpu, mut all_faults, mut failed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), 0);
    let mut last = None;
    for pass in 0..(2 + reps) {
        let batch = events.to_vec();
        drop(last.take());
        let mut idx = make();
        let f0 = minor_faults();
        let c0 = cpu_seconds();
        let t0 = Instant::now();
        let f = apply(&mut idx, batch);
        let w = t0.elapsed().as_secs_f64();
        let c = cpu_seconds() - c0;
        all_cpu.push(c);
        all_faults.push(minor_faults() - f0);
        if pass >= 2 {
            cpu.push(c);
            wall.push(w);
            failed = f;
        }
        last = Some(idx);
    }
    let last = last.expect("at least the two untimed passes ran");
    Passes {
        cpu,
        wall,
        all_cpu,
        all_faults,
        failed,
        last,
    }
}

/// Queries file: "VEQ1", u32 count; per query u32 length then that many u64 local block hashes.
fn read_queries(path: &str) -> Vec<Vec<LocalBlockHash>> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut r = Reader { b: &bytes, at: 0 };
    assert_eq!(r.take(4), b"VEQ1", "{path}: not a queries file");
    let n = r.u32() as usize;
    let out = (0..n)
        .map(|_| {
            let len = r.u32() as usize;
            (0..len).map(|_| LocalBlockHash(r.u64())).collect()
        })
        .collect();
    assert_eq!(r.at, bytes.len(), "{path}: trailing bytes");
    out
}

/// RadixTree's answers to the queries, written as "VEA1", u32 count; per query u32 entries, then
/// per entry u64 worker id, u32 dp rank, u32 score. Also returns each query's latency in
/// microseconds: the fastest of `rounds` calls, rounds interleaved over all queries, as the
/// TypeScript benchmark measures its own (none when `rounds` is 0).
fn answer(tree: &RadixTree, queries: &[Vec<LocalBlockHash>], path: &str, rounds: usize) -> Vec<f64> {
    let mut out = Vec::new();
    out.extend_from_slice(b"VEA1");
    out.extend_from_slice(&(queries.len() as u32).to_le_bytes());
    for q in queries {
        let s = tree.find_matches(q.clone(), false);
        let mut entries: Vec<_> = s.scores.iter().collect();
        entries.sort();
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for (w, score) in entries {
            out.extend_from_slice(&w.worker_id.to_le_bytes());
            out.extend_from_slice(&w.dp_rank.to_le_bytes());
            out.extend_from_slice(&score.to_le_bytes());
        }
    }
    fs::write(path, out).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut best = vec![f64::INFINITY; queries.len()];
    for _ in 0..rounds {
        for (i, q) in queries.iter().enumerate() {
            // find_matches takes the sequence by value: the copy is made before the clock starts.
            let seq = q.clone();
            let t0 = Instant::now();
            let s = tree.find_matches(seq, false);
            let us = t0.elapsed().as_secs_f64() * 1e6;
            std::hint::black_box(s);
            best[i] = best[i].min(us);
        }
    }
    best
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// The `ActiveLoad`s `--encode-wire` serialises (the wire test expects exactly these).
fn active_load_samples() -> Vec<ActiveLoad> {
    vec![
        ActiveLoad {
            worker_id: u64::MAX,
            dp_rank: 3,
            active_decode_blocks: Some(12),
            active_prefill_tokens: Some(4096),
            kv_used_blocks: None,
        },
        ActiveLoad {
            worker_id: 0x8000_0000_0000_0001,
            dp_rank: 0,
            active_decode_blocks: None,
            active_prefill_tokens: None,
            kv_used_blocks: Some(77),
        },
    ]
}

/// The `ActiveSequenceEvent`s `--encode-wire` serialises (the wire test expects exactly these).
fn active_sequence_samples() -> Vec<ActiveSequenceEvent> {
    let worker = WorkerWithDpRank::new(u64::MAX - 1, 2);
    vec![
        ActiveSequenceEvent {
            request_id: "req-1".to_string(),
            worker,
            data: ActiveSequenceEventData::AddRequest {
                token_sequence: Some(vec![u64::MAX, 1, 0x8000_0000_0000_0000]),
                track_prefill_tokens: false,
                expected_output_tokens: Some(256),
                prefill_load_hint: Some(PrefillLoadHint {
                    initial_effective_prefill_tokens: 1024,
                    expected_prefill_duration: Some(std::time::Duration::new(1, 500_000_001)),
                }),
            },
            router_id: 0xfeed_face_cafe_beef,
            lora_name: Some("adapter-a".to_string()),
        },
        ActiveSequenceEvent {
            request_id: "req-1".to_string(),
            worker,
            data: ActiveSequenceEventData::MarkPrefillCompleted,
            router_id: 7,
            lora_name: None,
        },
        ActiveSequenceEvent {
            request_id: "req-1".to_string(),
            worker,
            data: ActiveSequenceEventData::Free,
            router_id: 7,
            lora_name: None,
        },
    ]
}

/// `--encode-wire FILE`: the input events, and the samples above, serialised by Dynamo's own serde
/// derives, as its publishers do (MessagePack with field names, `rmp_serde::to_vec_named`; JSON,
/// `serde_json`). File: "VEW1", u32 records; per record u8 kind (1 RouterEvent MessagePack,
/// 2 RouterEvent JSON, 3/4 ActiveLoad, 5/6 ActiveSequenceEvent, 7/8 one ActiveSequenceEventBatch of
/// all the sequence samples), u32 length, the bytes. Records of one kind are in input order.
fn encode_wire(events: &[RouterEvent], out: &str) {
    let mut buf = Vec::new();
    let mut records = 0u32;
    let mut put = |kind: u8, bytes: Vec<u8>| {
        buf.push(kind);
        buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        buf.extend_from_slice(&bytes);
        records += 1;
    };
    for e in events {
        put(1, rmp_serde::to_vec_named(e).expect("msgpack"));
        put(2, serde_json::to_vec(e).expect("json"));
    }
    for l in active_load_samples() {
        put(3, rmp_serde::to_vec_named(&l).expect("msgpack"));
        put(4, serde_json::to_vec(&l).expect("json"));
    }
    for s in active_sequence_samples() {
        put(5, rmp_serde::to_vec_named(&s).expect("msgpack"));
        put(6, serde_json::to_vec(&s).expect("json"));
    }
    let batch = ActiveSequenceEventBatch {
        events: active_sequence_samples(),
    };
    put(7, rmp_serde::to_vec_named(&batch).expect("msgpack"));
    put(8, serde_json::to_vec(&batch).expect("json"));
    let mut file = b"VEW1".to_vec();
    file.extend_from_slice(&records.to_le_bytes());
    file.extend_from_slice(&buf);
    fs::write(out, file).unwrap_or_else(|e| panic!("{out}: {e}"));
}

/// `--hash IN OUT`: Dynamo's own block hashing for each case of IN ("VEH1", u32 cases; per case
/// u32 block size, u32 LoRA name length (0: none) and its UTF-8 bytes, u32 token count, the tokens
/// as u32). OUT: "VEHA", u32 cases; per case u32 blocks, then the local block hashes
/// (`compute_block_hash_for_seq`) and the sequence hashes (`compute_seq_hash_for_block`) as u64s.
fn hash_cases(input: &str, out: &str) {
    let bytes = fs::read(input).unwrap_or_else(|e| panic!("{input}: {e}"));
    let mut r = Reader { b: &bytes, at: 0 };
    assert_eq!(r.take(4), b"VEH1", "{input}: not a hash-cases file");
    let n = r.u32();
    let mut buf = b"VEHA".to_vec();
    buf.extend_from_slice(&n.to_le_bytes());
    for _ in 0..n {
        let block_size = r.u32();
        let lora_len = r.u32() as usize;
        let lora = String::from_utf8(r.take(lora_len).to_vec()).expect("LoRA name UTF-8");
        let count = r.u32() as usize;
        let tokens: Vec<u32> = (0..count).map(|_| r.u32()).collect();
        let options = BlockHashOptions {
            lora_name: (lora_len > 0).then_some(lora.as_str()),
            ..Default::default()
        };
        let local = compute_block_hash_for_seq(&tokens, block_size, options);
        let seq = compute_seq_hash_for_block(&local);
        buf.extend_from_slice(&(local.len() as u32).to_le_bytes());
        for h in &local {
            buf.extend_from_slice(&h.0.to_le_bytes());
        }
        for h in &seq {
            buf.extend_from_slice(&h.to_le_bytes());
        }
    }
    assert_eq!(r.at, bytes.len(), "{input}: trailing bytes");
    fs::write(out, buf).unwrap_or_else(|e| panic!("{out}: {e}"));
}

/// Events ConcurrentRadixTreeCompressed rejects, from one more pass, untimed: its worker loop only
/// logs a rejected event, so each event goes with an acknowledgement here (which the timed passes
/// leave out, to time the loop as Dynamo's router runs it).
fn crtc_rejected(events: &[RouterEvent]) -> u64 {
    let tree = ConcurrentRadixTreeCompressed::new();
    let (tx, rx) = flume::unbounded();
    let mut acks = Vec::with_capacity(events.len());
    for event in events.iter().cloned() {
        let (resp, ack) = tokio::sync::oneshot::channel();
        tx.send(WorkerTask::EventWithAck { event, resp }).unwrap();
        acks.push(ack);
    }
    drop(tx);
    tree.worker(rx, None).expect("worker loop");
    acks.into_iter()
        .map(|mut ack| ack.try_recv())
        .filter(|r| !matches!(r, Ok(true)))
        .count() as u64
}

fn remove(tree: &mut RadixTree, leave: Leave) {
    match leave {
        Leave::Worker(w) => tree.remove_worker(w),
        Leave::DpRank(w, dp) => tree.remove_worker_dp_rank(w, dp),
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: vantage-dynamo-oracle [--check-only | --encode-wire FILE | --hash IN OUT] [--reps N] [--rounds N] [--queries FILE --answers FILE] LABEL=FILE...  (a timed replay: exactly one LABEL=FILE; prints one JSON object)");
        std::process::exit(2);
    }
    let mut reps = 3usize;
    let mut rounds = 3usize;
    let mut check_only = false;
    let mut hash_io: Option<(String, String)> = None;
    let mut encode_out: Option<String> = None;
    let mut queries_path = None;
    let mut answers_path = None;
    let mut inputs = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--check-only" => {
                check_only = true;
                i += 1;
                continue;
            }
            "--encode-wire" => encode_out = Some(args[i + 1].clone()),
            "--hash" => {
                hash_io = Some((args[i + 1].clone(), args[i + 2].clone()));
                i += 3;
                continue;
            }
            "--reps" => reps = args[i + 1].parse().expect("--reps N"),
            "--rounds" => rounds = args[i + 1].parse().expect("--rounds N"),
            "--queries" => queries_path = Some(args[i + 1].clone()),
            "--answers" => answers_path = Some(args[i + 1].clone()),
            _ => {
                let (label, path) = args[i].split_once('=').expect("LABEL=FILE");
                inputs.push((label.to_string(), path.to_string()));
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let queries = queries_path.as_deref().map(read_queries);
    if queries.is_some() != answers_path.is_some() {
        panic!("--queries and --answers go together");
    }

    if let Some((input, out)) = &hash_io {
        hash_cases(input, out);
        return;
    }

    if let Some(out) = &encode_out {
        let mut all = Vec::new();
        for (_, path) in &inputs {
            let (events, _, leaves) = read_events(path);
            assert!(leaves.is_empty(), "{path}: --encode-wire takes KV events only");
            all.extend(events);
        }
        encode_wire(&all, out);
        return;
    }

    if check_only {
        // The differential test's mode: RadixTree only, every event applied once, no timing;
        // prints how many events it rejected.
        let mut rejected = 0u64;
        let mut tree = RadixTree::new();
        for (_, path) in &inputs {
            let (events, _, leaves) = read_events(path);
            let mut leaves = leaves.into_iter().peekable();
            for (i, e) in events.into_iter().enumerate() {
                while let Some((_, leave)) = leaves.next_if(|(at, _)| *at <= i) {
                    remove(&mut tree, leave);
                }
                rejected += tree.apply_event(e).is_err() as u64;
            }
            for (_, leave) in leaves {
                remove(&mut tree, leave);
            }
        }
        if let (Some(q), Some(a)) = (&queries, &answers_path) {
            answer(&tree, q, a, 0);
        }
        println!("{{\"rejected\":{rejected}}}");
        return;
    }

    // The timed replay: one scenario per run (the benchmark runs the peer once per scenario).
    let [(label, path)] = inputs.as_slice() else {
        panic!("a timed replay takes one LABEL=FILE, got {}", inputs.len());
    };
    let (events, ops, leaves) = read_events(path);
    assert!(leaves.is_empty(), "{path}: timed replays take KV events only");
    eprintln!("[dynamo-oracle] {label}: {} events, {ops} block ops", events.len());
    let mut fields = vec![format!("\"scenario\":\"{label}\""), format!("\"block_ops\":{ops}")];
    for name in ["radix_tree", "positional", "concurrent_radix_tree_compressed"] {
        let (cpu, wall, failed) = match name {
            "radix_tree" => {
                let p = time_passes(&events, reps, RadixTree::new, |t, batch| {
                    batch.into_iter().map(|e| t.apply_event(e).is_err() as u64).sum()
                });
                let (cpu, wall, failed, tree) = (p.cpu, p.wall, p.failed, p.last);
                // Its first pass is the process's first: memory fresh from the system.
                eprintln!(
                    "[dynamo-oracle] {label} radix_tree: every pass {:?} ms CPU, {:?} page faults",
                    p.all_cpu.iter().map(|x| (x * 1000.0).round()).collect::<Vec<_>>(),
                    p.all_faults
                );
                fields.push(format!(
                    "\"radix_tree_first_pass_block_ops_per_s\":{}",
                    (ops as f64 / p.all_cpu[0]).round()
                ));
                fields.push(format!("\"radix_tree_first_pass_page_faults\":{}", p.all_faults[0]));
                fields.push(format!(
                    "\"radix_tree_timed_pass_page_faults\":{}",
                    p.all_faults[2..].iter().sum::<i64>() / reps as i64
                ));
                if let (Some(q), Some(a)) = (&queries, &answers_path) {
                    let mut lat = answer(&tree, q, a, rounds);
                    lat.sort_by(|x, y| x.partial_cmp(y).unwrap());
                    fields.push(format!("\"radix_tree_match_p50_us\":{:.2}", percentile(&lat, 50.0)));
                    fields.push(format!("\"radix_tree_match_p99_us\":{:.2}", percentile(&lat, 99.0)));
                    fields.push(format!("\"queries\":{}", q.len()));
                }
                (cpu, wall, failed)
            }
            "positional" => {
                let p = time_passes(
                    &events,
                    reps,
                    || {
                        (
                            PositionalIndexer::new(32),
                            FxHashMap::<WorkerWithDpRank, LevelIndex>::default(),
                        )
                    },
                    |(t, blocks), batch| {
                        batch
                            .into_iter()
                            .map(|e| t.apply_event(blocks, e, None).is_err() as u64)
                            .sum()
                    },
                );
                (p.cpu, p.wall, p.failed)
            }
            _ => {
                let p = time_passes(&events, reps, ConcurrentRadixTreeCompressed::new, |t, batch| {
                    // The backend's own worker loop, on this thread: it applies every queued event
                    // and returns when the queue is closed and empty.
                    let (tx, rx) = flume::unbounded();
                    for e in batch {
                        tx.send(WorkerTask::Event(e)).unwrap();
                    }
                    drop(tx);
                    t.worker(rx, None).expect("worker loop");
                    0
                });
                (p.cpu, p.wall, crtc_rejected(&events))
            }
        };
        let c = median(&cpu);
        let w = median(&wall);
        eprintln!(
            "[dynamo-oracle] {label} {name}: {:.2} M blocks/cpu-s (wall {:.2}), passes {:?} ms CPU, {failed} events rejected",
            ops as f64 / c / 1e6,
            ops as f64 / w / 1e6,
            cpu.iter().map(|x| (x * 1000.0).round()).collect::<Vec<_>>()
        );
        fields.push(format!("\"{name}_block_ops_per_s\":{}", (ops as f64 / c).round()));
        fields.push(format!("\"{name}_rejected_events\":{failed}"));
    }
    fields.push(format!("\"reps\":{reps}"));
    println!("{{{}}}", fields.join(","));
}
