//! The workspace behaves like a disk: each data program in
//! `tests/workspace/` runs twice from the same files (`tests/workspace/inputs`),
//! once under CPython 3.11 with a real `/mnt/data` (a tmpfs mounted in a
//! user and mount namespace of its own, so the host is untouched) and once
//! on a real `baton serve` through `POST /exec`, and both must print the
//! same and leave the same files, byte for byte: what the program created,
//! changed and removed, through `open`, `os`, pathlib, shutil, tempfile,
//! zipfile and tarfile, with the errors a disk gives.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::server::{KEY, Server};
use serde_json::{Value, json};

type Files = BTreeMap<String, Vec<u8>>;

#[derive(Debug, PartialEq)]
struct Outcome {
    stdout: String,
    files: Files,
}

fn workspace_dir() -> PathBuf {
    common::root().join("tests").join("workspace")
}

/// Every regular file under `dir`, by its path relative to `dir`.
fn files_under(dir: &Path) -> Files {
    fn walk(base: &Path, dir: &Path, into: &mut Files) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, into);
            } else if let Ok(relative) = path.strip_prefix(base) {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
                into.insert(relative.to_string_lossy().into_owned(), bytes);
            }
        }
    }
    let mut files = Files::new();
    walk(dir, dir, &mut files);
    files
}

/// Runs `program` under CPython with the inputs in a real `/mnt/data`.
fn on_a_real_disk(program: &Path) -> Outcome {
    let scratch = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.path();
    let script = r#"set -e
mount -t tmpfs tmpfs /mnt
mkdir /mnt/data
cp -r "$INPUTS"/. /mnt/data/
cd /mnt/data
set +e
python3 "$PROGRAM" > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/rc"
mkdir "$OUT/final"
cp -r /mnt/data/. "$OUT/final/""#;
    let status = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", script])
        .env("INPUTS", workspace_dir().join("inputs"))
        .env("PROGRAM", program)
        .env("OUT", out)
        .status()
        .unwrap_or_else(|e| panic!("unshare: {e}"));
    assert!(status.success(), "the real-disk run could not be set up");
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    assert_eq!(
        read("rc").trim(),
        "0",
        "{} failed under CPython:\n{}",
        program.display(),
        read("stderr")
    );
    Outcome {
        stdout: read("stdout"),
        files: files_under(&out.join("final")),
    }
}

/// Uploads the inputs to a fresh session; returns the `files` of `/exec`.
fn upload_inputs(server: &Server, session: &str) -> Vec<Value> {
    let inputs = files_under(&workspace_dir().join("inputs"));
    let texts: Vec<(String, String)> = inputs
        .iter()
        .map(|(name, bytes)| (name.clone(), String::from_utf8_lossy(bytes).into_owned()))
        .collect();
    let mut parts = vec![("session_id", None, session)];
    for (name, text) in &texts {
        parts.push(("file", Some(name.as_str()), text.as_str()));
    }
    let (status, uploaded) = server.post_multipart("/upload", &parts, KEY);
    assert_eq!(status, 200, "{uploaded}");
    let files: Vec<Value> = uploaded["files"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = files.iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(names.len(), inputs.len(), "{uploaded}");
    files
        .iter()
        .map(|f| json!({"id": f["id"], "name": f["name"], "storage_session_id": session}))
        .collect()
}

/// Runs `program` on baton with the inputs as its files.
fn on_baton(server: &Server, program: &Path, session: &str) -> Outcome {
    let code = std::fs::read_to_string(program).unwrap_or_else(|e| panic!("{e}"));
    let files = upload_inputs(server, session);
    let (status, reply) = server.post(
        "/exec",
        &json!({"lang": "py", "code": code, "files": files, "session_id": session}),
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["stderr"],
        "",
        "{} failed on baton: {reply}",
        program.display()
    );
    let mut after = files_under(&workspace_dir().join("inputs"));
    for gone in reply["deleted_files"].as_array().into_iter().flatten() {
        after.remove(gone.as_str().unwrap_or_default());
    }
    for file in reply["files"].as_array().into_iter().flatten() {
        let path = format!(
            "/download/{session}/{}",
            file["id"].as_str().unwrap_or_default()
        );
        let (status, bytes) = server.get_bytes(&path, KEY);
        assert_eq!(status, 200, "{path}");
        after.insert(file["name"].as_str().unwrap_or_default().to_owned(), bytes);
    }
    Outcome {
        stdout: reply["stdout"].as_str().unwrap_or_default().to_owned(),
        files: after,
    }
}

/// What an archive holds, as CPython reads it: each member's name, kind
/// and the digest of its contents. Archives embed times, owners and
/// compression choices that differ between any two runs, on any disk.
fn archive_contents(name: &str, bytes: &[u8]) -> Option<String> {
    const READ: &str = r#"
import hashlib, io, sys, tarfile, zipfile
data = sys.stdin.buffer.read()
if sys.argv[1].endswith(".zip"):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        rows = [(i.filename, i.is_dir(), hashlib.sha256(z.read(i)).hexdigest()) for i in z.infolist()]
else:
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        rows = [(m.name, m.isdir(), hashlib.sha256(t.extractfile(m).read()).hexdigest() if m.isfile() else "")
                for m in t.getmembers()]
print(sorted(rows))
"#;
    let archive = [".zip", ".tar", ".tar.gz", ".tgz"];
    if !archive.iter().any(|suffix| name.ends_with(suffix)) {
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", READ, name])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    let output = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether two versions of a file are the same (archives by their members).
fn same_file(name: &str, real: Option<&Vec<u8>>, baton: Option<&Vec<u8>>) -> bool {
    match (real, baton) {
        (Some(a), Some(b)) if a != b => archive_contents(name, a)
            .is_some_and(|a_members| Some(a_members) == archive_contents(name, b)),
        (a, b) => a == b,
    }
}

fn differences(real: &Files, baton: &Files) -> Vec<String> {
    let mut names: Vec<&String> = real.keys().chain(baton.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| !same_file(name, real.get(*name), baton.get(*name)))
        .map(|name| {
            let size = |files: &Files| {
                files
                    .get(name)
                    .map_or("absent".into(), |b| format!("{} bytes", b.len()))
            };
            format!("{name}: disk {} / baton {}", size(real), size(baton))
        })
        .collect()
}

#[test]
fn data_programs_behave_as_on_a_real_disk() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let mut programs: Vec<PathBuf> = std::fs::read_dir(workspace_dir())
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    programs.sort();
    assert!(programs.len() >= 9, "{programs:?}");
    let mut failures = Vec::new();
    for (i, program) in programs.iter().enumerate() {
        let real = on_a_real_disk(program);
        let baton = on_baton(&server, program, &format!("ws{i}"));
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if real.stdout != baton.stdout {
            failures.push(format!(
                "{name}: stdout differs\n--- real disk\n{}\n--- baton\n{}",
                real.stdout, baton.stdout
            ));
        }
        let files = differences(&real.files, &baton.files);
        if !files.is_empty() {
            failures.push(format!("{name}: files differ: {files:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
