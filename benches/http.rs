//! HTTP benchmark (not a test): a real `baton serve` on loopback with a real
//! sled store, driven by concurrent clients. Each client runs executions of
//! three rounds to completion. Reports request latency medians, throughput,
//! and how many pauses shared each disk flush (group commit).
//!
//! Run: `cargo bench --ignore-rust-version --bench http`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../tests/common/server.rs"]
mod server;

use server::{KEY, Server};

const CODE: &str = "a = await get_weather(city='a')\nb = await get_weather(city='bb')\nc = await get_weather(city='ccc')\nprint(a['t'] + b['t'] + c['t'])\n";

fn post(base: &str, body: &Value) -> (Value, Duration) {
    let began = Instant::now();
    let reply: Value = ureq::post(&format!("{base}/exec/programmatic"))
        .set("x-api-key", KEY)
        .send_json(body.clone())
        .unwrap_or_else(|e| panic!("{e}"))
        .into_json()
        .unwrap_or_else(|e| panic!("{e}"));
    (reply, began.elapsed())
}

fn execution(base: &str) -> (Duration, Vec<Duration>) {
    let tools = json!([{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {}}}}]);
    let (mut reply, start) = post(base, &json!({"code": CODE, "tools": tools}));
    let mut continues = Vec::new();
    while reply["status"] == "tool_call_required" {
        let results: Vec<Value> = reply["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!({"call_id": c["id"], "result": {"t": 1}, "is_error": false}))
                    .collect()
            })
            .unwrap_or_default();
        let (next, took) = post(
            base,
            &json!({"continuation_token": reply["continuation_token"], "tool_results": results}),
        );
        continues.push(took);
        reply = next;
    }
    assert_eq!(reply["stdout"], "3\n", "{reply}");
    (start, continues)
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--pool-size", "8"]);
    execution(&server.base);
    for clients in [1usize, 8, 32] {
        let per_client = 120 / clients.max(1) + 2;
        let metrics_before = ureq::get(&format!("{}/metrics", server.base))
            .call()
            .ok()
            .and_then(|r| r.into_string().ok())
            .unwrap_or_default();
        let began = Instant::now();
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let base = server.base.clone();
                std::thread::spawn(move || {
                    (0..per_client)
                        .map(|_| execution(&base))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let runs: Vec<_> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        let elapsed = began.elapsed();
        let metrics_after = ureq::get(&format!("{}/metrics", server.base))
            .call()
            .ok()
            .and_then(|r| r.into_string().ok())
            .unwrap_or_default();
        let flushes = metric(&metrics_after, "baton_store_flushes_total")
            - metric(&metrics_before, "baton_store_flushes_total");
        let requests = runs.len() * 4;
        let starts: Vec<_> = runs.iter().map(|(s, _)| *s).collect();
        let continues: Vec<_> = runs.iter().flat_map(|(_, c)| c.clone()).collect();
        println!(
            "{clients:>3} clients: {:>6.0} requests/s   start median {:>6.2} ms   continue median {:>6.2} ms   {:>5.2} durable writes per flush",
            requests as f64 / elapsed.as_secs_f64(),
            median(starts),
            median(continues),
            requests as f64 / flushes.max(1.0)
        );
    }
}
