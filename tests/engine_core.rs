//! The durable core at engine level, with real children forked from a real
//! zygote: call styles, batching, hot and cold resume, replay checks, limits.

mod common;

use baton::engine::Step;
use baton::failure::Failure;
use baton::journal::CallResult;
use common::{engine, engine_with, run_to_end, spec, tools, value};
use serde_json::{Value, json};

const WEATHER: &str = r#"[
  {"name": "get-weather", "description": "weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}},
  {"name": "search", "parameters": {"type": "object", "properties": {"query": {}, "limit": {}}}}
]"#;

fn weather_answer(_round: usize, tool: &str, input: &Value) -> CallResult {
    match tool {
        "get-weather" => value(
            json!({"city": input["city"], "temp": 20 + input["city"].as_str().map_or(0, str::len)}),
        ),
        "search" => value(json!([input["query"], "result"])),
        other => CallResult::Error(format!("no tool {other}")),
    }
}

async fn run(
    source: &str,
    cold: impl Fn(usize) -> bool,
) -> (Step, Vec<Vec<(String, Value)>>, String, String) {
    let engine = engine();
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), 10_000))
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    let (step, rounds) = run_to_end(&engine, &mut record, weather_answer, cold).await;
    (step, rounds, record.stdout, record.stderr)
}

fn hot(_: usize) -> bool {
    false
}

#[tokio::test]
async fn awaited_call_pauses_and_resumes_hot() {
    let (step, rounds, stdout, stderr) = run(
        "w = await get_weather(city='SF')\nprint(w['temp'], w['city'])\n",
        hot,
    )
    .await;
    assert_eq!(step, Step::Completed, "stderr: {stderr}");
    assert_eq!(
        rounds,
        vec![vec![("get-weather".to_owned(), json!({"city": "SF"}))]]
    );
    assert_eq!(stdout, "22 SF\n");
}

#[tokio::test]
async fn every_call_style_reaches_the_tool() {
    let source = "\
a = get_weather('Oslo')
b = await tools.get_weather(city='Rome', unit='C')
c = tools.search('x', 3)
async def helper(city):
    return await get_weather(city=city)
d = await helper('Lima')
print(a['temp'], b['city'], c, d['city'])
";
    let (step, rounds, stdout, stderr) = run(source, hot).await;
    assert_eq!(step, Step::Completed, "stderr: {stderr}");
    let calls: Vec<_> = rounds.iter().flatten().cloned().collect();
    assert_eq!(
        calls,
        vec![
            ("get-weather".to_owned(), json!({"city": "Oslo"})),
            (
                "get-weather".to_owned(),
                json!({"city": "Rome", "unit": "C"})
            ),
            ("search".to_owned(), json!({"query": "x", "limit": 3})),
            ("get-weather".to_owned(), json!({"city": "Lima"})),
        ]
    );
    assert_eq!(stdout, "24 Rome ['x', 'result'] Lima\n");
}

#[tokio::test]
async fn gather_is_one_round() {
    let source = "\
import asyncio
r = await asyncio.gather(get_weather(city='a'), get_weather(city='bb'), search(query='q'))
print([x if isinstance(x, list) else x['temp'] for x in r])
tasks = [asyncio.create_task(get_weather(city=c)) for c in ['x', 'yy']]
done = await asyncio.gather(*tasks)
print(sorted(d['temp'] for d in done))
";
    let (step, rounds, stdout, stderr) = run(source, hot).await;
    assert_eq!(step, Step::Completed, "stderr: {stderr}");
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds[0].len(), 3);
    assert_eq!(rounds[1].len(), 2);
    assert_eq!(stdout, "[21, 22, ['q', 'result']]\n[21, 22]\n");
}

#[tokio::test]
async fn a_gather_over_the_calls_a_round_carries_takes_more_rounds() {
    // 10,000 calls to a round: the rest wait, in order, for the next; a
    // cold resume replays the same split.
    let source = "\
import asyncio
r = await asyncio.gather(*[get_weather(city='c' * (i % 7)) for i in range(10_003)])
print(len(r), sum(x['temp'] for x in r))
";
    let (step, rounds, stdout, stderr) = run(source, |round| round == 1).await;
    assert_eq!(step, Step::Completed, "stderr: {stderr}");
    let sizes: Vec<usize> = rounds.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10_000, 3]);
    assert_eq!(rounds[1][0].1, json!({"city": "c".repeat(10_000 % 7)}));
    let expected: usize = (0..10_003).map(|i| 20 + i % 7).sum();
    assert_eq!(stdout, format!("10003 {expected}\n"));
}

#[tokio::test]
async fn asyncio_run_style_works() {
    let source = "\
import asyncio
async def main():
    a, b = await asyncio.gather(get_weather(city='p'), get_weather(city='qq'))
    return a['temp'] + b['temp']
print(asyncio.run(main()))
";
    let (step, rounds, stdout, stderr) = run(source, hot).await;
    assert_eq!(step, Step::Completed, "stderr: {stderr}");
    assert_eq!(rounds.len(), 1);
    assert_eq!(stdout, "43\n");
}

#[tokio::test]
async fn tool_errors_raise_at_the_call_site() {
    let source = "\
try:
    await nothing_here()
except NameError:
    print('no such name')
try:
    await search(query='boom')
except Exception as e:
    print('caught', type(e).__name__, e)
";
    let engine = engine();
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), 10_000))
        .unwrap_or_else(|e| panic!("{e}"));
    let (step, _) = run_to_end(
        &engine,
        &mut record,
        |_, _, _| CallResult::Error("quota exhausted".into()),
        hot,
    )
    .await;
    assert_eq!(step, Step::Completed, "stderr: {}", record.stderr);
    assert_eq!(
        record.stdout,
        "no such name\ncaught ToolError quota exhausted\n"
    );
}

#[tokio::test]
async fn cold_resume_matches_hot() {
    let source = "\
import random, time, uuid
seen = []
for city in ['a', 'bb', 'ccc']:
    w = await get_weather(city=city)
    seen.append(w['temp'])
    print(city, w['temp'], random.randint(1, 10**9), uuid.uuid4(), round(time.time(), 3))
print(hash('stable'), sum(seen))
";
    let (hot_step, hot_rounds, hot_out, _) = run(source, hot).await;
    let (cold_step, cold_rounds, cold_out, cold_err) = run(source, |_| true).await;
    assert_eq!(hot_step, Step::Completed);
    assert_eq!(cold_step, Step::Completed, "stderr: {cold_err}");
    assert_eq!(hot_rounds, cold_rounds);
    assert_eq!(hot_out, cold_out);
    assert_eq!(hot_out.lines().count(), 4);
}

#[tokio::test]
async fn two_executions_get_different_randomness() {
    let engine = engine();
    let source = "import random, uuid\nprint(random.random(), uuid.uuid4())\n";
    let mut outputs = Vec::new();
    for seed in [[1u8; 32], [2u8; 32], [1u8; 32]] {
        let mut s = spec(source, vec![], 10_000);
        s.seed = Some(seed);
        let mut record = engine.prepare(s).unwrap_or_else(|e| panic!("{e}"));
        let (step, _) = run_to_end(&engine, &mut record, weather_answer, hot).await;
        assert_eq!(step, Step::Completed, "{}", record.stderr);
        outputs.push(record.stdout);
    }
    let parts = |i: usize| outputs[i].split(' ').map(str::to_owned).collect::<Vec<_>>();
    assert_ne!(
        parts(0)[0],
        parts(1)[0],
        "random.random() repeats across executions"
    );
    assert_ne!(
        parts(0)[1],
        parts(1)[1],
        "uuid4() repeats across executions"
    );
    assert_eq!(
        outputs[0], outputs[2],
        "the same seed must give the same values"
    );
}

/// Starts `source` with the weather tools and checks that it paused.
async fn start_paused(
    engine: &baton::engine::Engine,
    source: &str,
) -> baton::journal::ExecutionRecord {
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), 10_000))
        .unwrap_or_else(|e| panic!("{e}"));
    let step = engine
        .start(&mut record)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(step, Step::Paused(_)), "{step:?}");
    record
}

#[tokio::test]
async fn replay_detects_a_changed_journal() {
    let engine = engine();
    let source = "a = await get_weather(city='a')\nb = await get_weather(city='b')\nprint(a, b)\n";
    let mut record = start_paused(&engine, source).await;
    let (step, _) = engine
        .resume(&mut record, vec![value(json!(1))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(step, Step::Paused(_)));
    record.rounds[0].calls[0].input = r#"{"city":"elsewhere"}"#.into();
    engine.evict(&record.id);
    let (step, _) = engine
        .resume(&mut record, vec![value(json!(2))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Step::Failed(Failure::NonDeterminism(error)) = step else {
        panic!("expected a replay divergence, got {step:?}")
    };
    assert!(
        error.starts_with("Non-deterministic replay at round 1 (line 1)"),
        "{error}"
    );
    assert!(error.contains("elsewhere"), "{error}");
}

#[tokio::test]
async fn a_record_of_another_hash_seed_is_not_replayed() {
    let engine = engine();
    let source = "a = await get_weather(city='a')\nb = await get_weather(city='b')\nprint({'x', 'y', 'z'})\n";
    let mut record = start_paused(&engine, source).await;
    let (step, _) = engine
        .resume(&mut record, vec![value(json!({"temp": 1}))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(step, Step::Paused(_)), "{step:?}");
    engine.evict(&record.id);
    record.hash_seed += 1;
    let (step, _) = engine
        .resume(&mut record, vec![value(json!({"temp": 2}))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Step::Failed(Failure::NonDeterminism(error)) = step else {
        panic!("expected a refused replay, got {step:?}")
    };
    assert!(error.contains("hash seed 1"), "{error}");
}

#[tokio::test]
async fn replay_detects_output_that_changed() {
    // Every source of difference between two children (pids, clocks,
    // entropy) is fixed per execution, so the journal's output is altered
    // instead, as a store corrupted between rounds would.
    let engine = engine();
    let source = "print('before')\nawait get_weather(city='x')\nprint('after')\n";
    let mut record = start_paused(&engine, source).await;
    assert_eq!(record.stdout, "before\n");
    record.stdout = "BEFORE\n".into();
    engine.evict(&record.id);
    let (step, _) = engine
        .resume(&mut record, vec![value(json!(1))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Step::Failed(Failure::NonDeterminism(error)) = step else {
        panic!("expected a replay divergence, got {step:?}")
    };
    assert!(
        error.starts_with("Non-deterministic replay at round 1"),
        "{error}"
    );
    assert!(error.contains("stdout differs"), "{error}");
}

#[tokio::test]
async fn a_child_sees_the_same_pid_hot_and_cold() {
    // In its own pid namespace every child is pid 1: printing the pid
    // replays exactly.
    let source =
        "import os\nprint(os.getpid())\nawait get_weather(city='x')\nprint('after', os.getpid())\n";
    let (step, _, stdout, stderr) = run(source, |_| true).await;
    assert_eq!(step, Step::Completed, "{stderr}");
    assert_eq!(stdout, "1\nafter 1\n");
}

#[tokio::test]
async fn syntax_error_is_reported_like_cpython() {
    let (step, rounds, _, stderr) = run("x = 1\ny = = 2\n", hot).await;
    assert!(rounds.is_empty());
    let Step::Failed(Failure::Exception(error)) = step else {
        panic!("expected an exception, got {step:?}")
    };
    assert!(error.starts_with("SyntaxError"), "{error}");
    assert!(error.contains("line 2"), "{error}");
    assert!(stderr.contains("line 2\n    y = = 2\n"), "{stderr}");
}

#[tokio::test]
async fn traceback_shows_the_users_lines() {
    let source = "w = await get_weather(city='x')\n\ndef f(v):\n    return v['missing']\nf(w)\n";
    let (step, _, _, stderr) = run(source, hot).await;
    assert_eq!(
        step,
        Step::Failed(Failure::Exception("KeyError: 'missing'".into()))
    );
    assert!(
        stderr.starts_with("Traceback (most recent call last):\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("line 5, in <module>\n    f(w)\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("line 4, in f\n    return v['missing']\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("baton_runtime"), "{stderr}");
}

async fn fails_with(source: &str, timeout_ms: u64) -> (String, String, std::time::Duration) {
    let engine = engine_with(|c| c.limits.stdout_cap = 1 << 16);
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), timeout_ms))
        .unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let (step, _) = run_to_end(&engine, &mut record, weather_answer, hot).await;
    let Step::Failed(error) = step else {
        panic!("expected a failure, got {step:?}")
    };
    (error.to_string(), record.stdout, started.elapsed())
}

#[tokio::test]
async fn infinite_loop_hits_the_time_limit() {
    let (error, stdout, _) = fails_with("print('start')\nwhile True:\n    pass\n", 1000).await;
    assert_eq!(error, "Time limit exceeded");
    assert_eq!(stdout, "start\n");
}

#[tokio::test]
async fn loop_that_swallows_the_interrupt_is_killed() {
    let source = "while True:\n    try:\n        while True: pass\n    except BaseException:\n        pass\n";
    let (error, _, _) = fails_with(source, 1000).await;
    assert_eq!(error, "Time limit exceeded");
}

#[tokio::test]
async fn long_sleep_and_native_call_are_killed() {
    for source in [
        "import time\ntime.sleep(10**6)\n",
        "print(sum(range(10**13)))\n",
    ] {
        let (error, _, _) = fails_with(source, 1000).await;
        assert_eq!(error, "Time limit exceeded", "{source}");
    }
}

#[tokio::test]
async fn paused_time_does_not_count() {
    let engine = engine();
    let source =
        "import time\nfor i in range(3):\n    await get_weather(city='x')\nprint('done')\n";
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), 1000))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut step = engine
        .start(&mut record)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    while let Step::Paused(_) = step {
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        step = engine
            .resume(&mut record, vec![value(json!(1))])
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .0;
    }
    assert_eq!(step, Step::Completed, "{}", record.stderr);
    assert!(record.used_ms < 1000, "used {}", record.used_ms);
}

#[tokio::test]
async fn memory_bombs_report_out_of_memory() {
    for source in [
        "x = 'a' * 10**10\n",
        "x = [0] * 10**10\n",
        "s = 'ab'\nwhile True:\n    s = s + s\n",
        "keep = []\nwhile True:\n    keep.append(bytearray(10**6))\n",
    ] {
        let (error, _, _) = fails_with(source, 20_000).await;
        assert_eq!(error, "Out of memory", "{source}");
    }
}

#[tokio::test]
async fn deep_recursion_raises_recursion_error() {
    let (error, _, _) = fails_with("def f(n):\n    return f(n + 1)\nf(0)\n", 10_000).await;
    assert!(error.starts_with("RecursionError"), "{error}");
}

#[tokio::test]
async fn output_over_the_cap_stops_with_partial_output() {
    let (error, stdout, _) = fails_with("while True:\n    print('x' * 1000)\n", 10_000).await;
    assert_eq!(error, "stdout length exceeded");
    assert_eq!(stdout.len(), 1 << 16);
}

#[tokio::test]
async fn oversized_source_and_collisions_are_refused() {
    let engine = engine_with(|c| c.limits.max_source_bytes = 100);
    let big = "x = 1\n".repeat(50);
    let refused = engine.prepare(spec(&big, vec![], 1000));
    assert!(
        matches!(refused, Err(baton::engine::EngineError::BadRequest(ref m)) if m.contains("over the limit"))
    );
    let colliding = tools(r#"[{"name": "get-weather"}, {"name": "get weather"}]"#);
    let refused = engine.prepare(spec("pass", colliding, 1000));
    let Err(baton::engine::EngineError::BadRequest(message)) = refused else {
        panic!("collision accepted")
    };
    assert!(
        message.contains("get-weather") && message.contains("get weather"),
        "{message}"
    );
}

#[tokio::test]
async fn a_killed_parked_child_resumes_cold() {
    let engine = engine();
    let source = "a = await get_weather(city='a')\nb = await get_weather(city='bb')\nprint(a['temp'], b['temp'])\n";
    let mut record = start_paused(&engine, source).await;
    let pid = engine
        .parked_pid(&record.id)
        .unwrap_or_else(|| panic!("not parked"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap_or_else(|e| panic!("kill: {e}"));
    let answer = || vec![value(json!({"temp": 1}))];
    let (step, _) = engine
        .resume(&mut record, answer())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(step, Step::Paused(_)), "{step:?}");
    let (step, _) = engine
        .resume(&mut record, answer())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(step, Step::Completed, "{}", record.stderr);
    assert_eq!(record.stdout, "1 1\n");
}

#[tokio::test]
async fn no_step_runs_for_an_execution_ended_before_its_child_took_it() {
    let engine = engine();
    // A cancel that lands after a continuation claimed its round, while the
    // child is still parked: the kill evicts it, and the continuation must
    // not replay the round cold in a fresh child that nobody would kill.
    let source =
        "a = await get_weather(city='a')\nprint('ran on')\nb = await get_weather(city='b')\n";
    let mut record = start_paused(&engine, source).await;
    assert!(engine.kill(&record.id), "the kill finds the parked child");
    assert_eq!(engine.parked_count(), 0);
    let (step, _) = engine
        .resume(&mut record, vec![value(json!(1))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(step, Step::Failed(Failure::Cancelled));
    assert_eq!(record.stdout, "", "the round never ran");
    assert_eq!(engine.parked_count(), 0, "nothing parked for it");
    // A child taken for an execution that ended before the child was
    // registered as running it (here: ended before its start) is killed
    // before it answers, and the step reads as cancelled.
    let mut ended = engine
        .prepare(spec("print('ran')\n", tools(WEATHER), 10_000))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!engine.kill(&ended.id), "no child to kill yet");
    let step = engine
        .start(&mut ended)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(step, Step::Failed(Failure::Cancelled));
    assert_eq!(ended.stdout, "", "the program never ran");
    assert!(engine.running_ids().is_empty());
    // Other executions run as before.
    let mut other = start_paused(&engine, source).await;
    let (step, _) = engine
        .resume(&mut other, vec![value(json!(1))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(step, Step::Paused(_)), "{step:?}");
    assert_eq!(other.stdout, "ran on\n");
}

#[tokio::test]
async fn the_zygote_is_in_huge_pages_and_a_child_gets_none_of_its_own() {
    let engine = engine();
    let record = start_paused(&engine, "a = await get_weather(city='a')\nprint(a)\n").await;
    let child = engine
        .parked_pid(&record.id)
        .unwrap_or_else(|| panic!("not parked"));
    // A child's few written pages must never become 2 MiB private copies
    // (by a fault or by khugepaged): the parked child's budget is 4 MB.
    let status = std::fs::read_to_string(format!("/proc/{child}/status"))
        .unwrap_or_else(|e| panic!("status of child {child}: {e}"));
    assert!(
        status.contains("THP_enabled:\t0"),
        "child {child} may get huge pages:\n{status}"
    );
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if thp.is_empty() || thp.contains("[never]") {
        return; // No huge pages on this kernel: nothing to advise.
    }
    let zygote = engine.zygote_pid().unwrap_or_else(|| panic!("no zygote"));
    let smaps = std::fs::read_to_string(format!("/proc/{zygote}/smaps"))
        .unwrap_or_else(|e| panic!("smaps of the zygote {zygote}: {e}"));
    let advised = smaps
        .lines()
        .filter(|l| l.starts_with("VmFlags:") && l.split_whitespace().any(|f| f == "hg"))
        .count();
    assert!(
        advised > 0,
        "no mapping of the zygote is advised for huge pages"
    );
}

/// The pids this process holds a pidfd of (from `/proc/self/fdinfo`).
fn pidfd_targets() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fdinfo") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .filter_map(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("Pid:"))
                .and_then(|pid| pid.trim().parse().ok())
        })
        .collect()
}

#[tokio::test]
async fn children_are_held_and_killed_by_pidfd() {
    let engine = engine();
    let source = "a = await get_weather(city='a')\nprint(a)\n";
    let record = start_paused(&engine, source).await;
    let pid = engine
        .parked_pid(&record.id)
        .unwrap_or_else(|| panic!("not parked"));
    // The parked child is held by a pidfd, so no signal meant for it can
    // reach another process that later gets its pid.
    assert!(
        pidfd_targets().contains(&pid),
        "no pidfd of child {pid} among {:?}",
        pidfd_targets()
    );
    assert!(engine.kill(&record.id));
    let gone = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat.contains(") Z "))
    });
    assert!(gone, "child {pid} still runs after its kill");
    assert!(
        !pidfd_targets().contains(&pid),
        "the pidfd outlived the child"
    );
}

#[tokio::test]
async fn a_child_that_dies_fails_only_its_own_execution() {
    let engine = engine();
    let mut parked = engine
        .prepare(spec(
            "w = await get_weather(city='x')\nprint(w['temp'])\n",
            tools(WEATHER),
            10_000,
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        engine.start(&mut parked).await,
        Ok(Step::Paused(_))
    ));
    let mut dying = engine
        .prepare(spec(
            "import os\nprint('bye')\nos.abort()\n",
            vec![],
            10_000,
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    let step = engine
        .start(&mut dying)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Step::Failed(Failure::Crashed(error)) = step else {
        panic!("expected a crash, got {step:?}")
    };
    assert!(
        error.contains("died") || error.contains("signal"),
        "{error}"
    );
    let (step, _) = engine
        .resume(&mut parked, vec![value(json!({"temp": 7}))])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(step, Step::Completed, "{}", parked.stderr);
    assert_eq!(parked.stdout, "7\n");
}

/// Writes real execution records, paused at each round and ended, as seeds
/// for the journal fuzz target:
/// `cargo nextest run --ignore-rust-version --test engine_core --run-ignored only journal_fuzz_seeds`.
#[tokio::test]
#[ignore = "writes fuzz/corpus/journal; run by hand"]
async fn journal_fuzz_seeds() {
    let programs = [
        "w = await get_weather(city='SF')\nprint(w['temp'])\n",
        "import asyncio\nrs = await asyncio.gather(get_weather(city='A'), search(query='q', limit=2))\nprint(rs)\nx = await search(query='é')\n",
        "def f(c):\n    return get_weather(c)\nfor c in ['x', 'yy']:\n    try:\n        print(f(c))\n    except ToolError as e:\n        print('no', e)\n",
        "print(1 +)\n",
    ];
    let engine = engine();
    let dir = common::root().join("fuzz/corpus/journal");
    let mut written = 0;
    for (index, source) in programs.iter().enumerate() {
        let mut record = engine
            .prepare(spec(source, tools(WEATHER), 10_000))
            .unwrap_or_else(|e| panic!("prepare: {e}"));
        let mut step = engine
            .start(&mut record)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut round = 0;
        loop {
            let path = dir.join(format!("seed-{index}-{round}"));
            std::fs::write(&path, record.encode().unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|e| panic!("{e}"));
            written += 1;
            let Step::Paused(calls) = &step else { break };
            let results = calls
                .iter()
                .map(|c| match round % 2 {
                    0 => weather_answer(
                        round,
                        &c.tool,
                        &serde_json::from_str(&c.input).unwrap_or(Value::Null),
                    ),
                    _ => CallResult::Error("tool failed".into()),
                })
                .collect();
            step = engine
                .resume(&mut record, results)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .0;
            round += 1;
        }
    }
    assert!(written >= programs.len() * 2, "wrote {written} seeds");
}

/// A record that decodes never crashes its replay: real records of a
/// two-round program, with random bytes overwritten; each one that still
/// decodes is resumed cold by a real child, which must answer with a step
/// (completed, a failure it explains, or a pause), never crash.
#[test]
fn corrupted_records_that_decode_replay_without_crashing() {
    use baton::journal::ExecutionRecord;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let (runtime, engine) = common::runtime_with_engine();
    let source = "import asyncio\na = await get_weather(city='Oslo')\nprint('a', a)\nb, c = await asyncio.gather(search(query=a['city'], limit=1), get_weather(city='Rome'))\nprint(b, c['temp'])\n";
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), 10_000))
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    let step = runtime.block_on(engine.start(&mut record));
    assert!(matches!(step, Ok(Step::Paused(_))), "{step:?}");
    let answers = vec![value(json!({"city": "Oslo", "temp": 3}))];
    let step = runtime.block_on(engine.resume(&mut record, answers));
    assert!(matches!(step, Ok((Step::Paused(_), _))), "{step:?}");
    let encoded = record.encode().unwrap_or_else(|e| panic!("{e}"));

    let config = Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let flips = proptest::collection::vec((0..encoded.len(), proptest::num::u8::ANY), 1..4);
    let (decoded, replayed) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let result = runner.run(&flips, |flips| {
        let mut bytes = encoded.clone();
        for (at, byte) in flips {
            bytes[at] = byte;
        }
        let Ok(mut corrupt) = ExecutionRecord::decode(&bytes) else {
            return Ok(());
        };
        decoded.set(decoded.get() + 1);
        engine.evict(&corrupt.id);
        let results = corrupt.pending.as_ref().map_or(0, |p| p.calls.len());
        let results = (0..results).map(|_| value(json!({"temp": 1}))).collect();
        match runtime.block_on(engine.resume(&mut corrupt, results)) {
            Ok((Step::Failed(error @ Failure::Crashed(_)), _)) => Err(
                proptest::test_runner::TestCaseError::fail(format!("replay crashed: {error}")),
            ),
            Ok(_) => {
                replayed.set(replayed.get() + 1);
                Ok(())
            }
            Err(error) => Err(proptest::test_runner::TestCaseError::fail(format!(
                "engine error: {error}"
            ))),
        }
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    // Budgets at the edges of their range.
    let edges = [(u64::MAX, 0), (u64::MAX, u64::MAX), (0, u64::MAX), (1, 0)];
    for (timeout_ms, used_ms) in edges {
        let mut edge = record.clone();
        (edge.timeout_ms, edge.used_ms) = (timeout_ms, used_ms);
        let Ok(mut edge) = ExecutionRecord::decode(&edge.encode().unwrap_or_default()) else {
            continue;
        };
        let results = vec![value(json!([])), value(json!({"temp": 1}))];
        let step = runtime.block_on(engine.resume(&mut edge, results));
        assert!(
            matches!(&step, Ok((Step::Completed | Step::Failed(_), _))),
            "budget {timeout_ms}/{used_ms}: {step:?}"
        );
    }
    let (decoded, replayed) = (decoded.get(), replayed.get());
    eprintln!("{decoded} of 400 corrupted records decoded, {replayed} replayed");
    assert!(
        replayed > 10,
        "only {replayed} of {decoded} corrupted records were replayed"
    );
}

/// Waits until the engine's parked children number `count` and are all
/// measured (a measure is taken off the request's path).
async fn parked_settles(engine: &baton::engine::Engine, count: usize) -> u64 {
    for _ in 0..200 {
        let bytes = engine.parked_bytes();
        if engine.parked_count() == count && bytes > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if engine.parked_bytes() == bytes && engine.parked_count() == count {
                return bytes;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "parked children did not settle at {count}: {} parked, {} bytes",
        engine.parked_count(),
        engine.parked_bytes()
    )
}

#[tokio::test]
async fn parked_children_beyond_the_memory_budget_are_evicted_and_resume_cold() {
    let source = "data = list(range(300000))\nw = await get_weather(city='x')\nprint(len(data), w['temp'])\n";
    for (budget, kept) in [(1u64 << 30, 3usize), (1, 1)] {
        let engine = engine_with(|c| c.max_parked_bytes = budget);
        let mut records = Vec::new();
        for _ in 0..3 {
            records.push(start_paused(&engine, source).await);
        }
        let bytes = parked_settles(&engine, kept).await;
        // 300 000 ints of a list the zygote never had: megabytes per child.
        assert!(
            bytes >= kept as u64 * (4 << 20),
            "{kept} parked children measured at {bytes} bytes"
        );
        let mut hot = 0;
        for mut record in records {
            let (step, kind) = engine
                .resume(&mut record, vec![value(json!({"temp": 7}))])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(step, Step::Completed, "{}", record.stderr);
            assert_eq!(record.stdout, "300000 7\n");
            hot += usize::from(kind == baton::engine::ResumeKind::Hot);
        }
        assert_eq!(
            hot, kept,
            "the parked children resumed hot, the evicted cold"
        );
        assert_eq!(engine.parked_count(), 0);
    }
}
