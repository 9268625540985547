//! Fault injection: the CLI killed with SIGKILL at random points of a refresh or a
//! trace write never leaves damaged or half-written files.
//!
//! - `bless` on a copy of `golden/` whose goldens are current, killed at seeded random
//!   delays spread over one whole run's duration: every file stays byte-identical (a
//!   refresh that changes nothing writes nothing, and writes are atomic renames), and
//!   `golden verify` passes. Leftover temporary files (`.NAME.PID.N.tmp`) are the only
//!   thing a kill may add.
//! - `bless` after an entry was removed (so the refresh must rewrite the lane), killed
//!   likewise: the lane's manifest is always either the old or the new one, whole, and
//!   the lane loads with every entry matching its stored output.
//! - `run --out FILE` killed likewise: FILE is absent or a complete trace that loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tiercheck_golden::GoldenDir;

const BIN: &str = env!("CARGO_BIN_EXE_tiercheck");
const KILLS: usize = 6;

/// Seeded delays in (0, 1), as fractions of a full run.
fn fractions(seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..KILLS)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            0.02 + 0.96 * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

fn is_temp(p: &Path) -> bool {
    let n = p.file_name().unwrap().to_string_lossy();
    n.starts_with('.') && n.ends_with(".tmp")
}

/// Every file under `root` (relative path -> bytes), temporary files apart.
fn snapshot(root: &Path) -> (BTreeMap<PathBuf, Vec<u8>>, Vec<PathBuf>) {
    let mut files = BTreeMap::new();
    let mut temps = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if is_temp(&p) {
                temps.push(p);
            } else {
                files.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    (files, temps)
}

fn bless(golden: &Path, filter: Option<&str>) -> Command {
    let mut c = Command::new(BIN);
    c.args(["bless", "--lane", "ref"]);
    if let Some(f) = filter {
        c.args(["--filter", f]);
    }
    c.env("TIERCHECK_GOLDEN_DIR", golden)
        .env_remove("CI") // bless refuses under CI; this is a scratch copy
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Run `cmd` to completion; its duration.
fn timed(mut cmd: Command) -> Duration {
    let t = Instant::now();
    let st = cmd.status().unwrap();
    assert!(st.success(), "{cmd:?} failed: {st}");
    t.elapsed()
}

/// Start `cmd`, SIGKILL it after `delay` (if still running); whether it was killed.
fn kill_after(cmd: Command, delay: Duration) -> bool {
    kill_or_time(cmd, delay).is_none()
}

/// Start `cmd` and SIGKILL it after `delay`: `None` when it was killed, else the time
/// it took to finish on its own.
fn kill_or_time(mut cmd: Command, delay: Duration) -> Option<Duration> {
    let mut child = cmd.spawn().unwrap();
    let t = Instant::now();
    while t.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill(); // SIGKILL on Unix
    let _ = child.wait();
    None
}

fn repo_golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join("golden")
}

#[test]
fn bless_killed_at_random_points_leaves_current_goldens_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let g = tmp.path().join("golden");
    copy_dir(&repo_golden(), &g);
    let (before, _) = snapshot(&g);

    let full = timed(bless(&g, None));
    let (after_full, _) = snapshot(&g);
    assert!(after_full == before, "a refresh of current goldens changed files");

    // A run that finishes before its kill point (the machine got faster than during the
    // timed run: other work on it ended) shortens the reference duration to its own and
    // the same fraction is tried again, up to three times, so the kills land inside runs.
    let mut full = full;
    let mut killed = 0;
    let attempts = fractions(0x5eed_0001).into_iter().flat_map(|f| [f; 3]);
    let mut done_at = None;
    for (i, f) in attempts.enumerate() {
        if done_at == Some(i / 3) {
            continue; // this fraction's kill already landed
        }
        match kill_or_time(bless(&g, None), full.mul_f64(f)) {
            None => {
                killed += 1;
                done_at = Some(i / 3);
            }
            Some(took) => full = full.min(took),
        }
        let (now, temps) = snapshot(&g);
        let changed: Vec<_> = before
            .iter()
            .filter(|(p, b)| now.get(*p) != Some(*b))
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert!(changed.is_empty(), "kill {i} at {f:.2} of a run: changed or lost {changed:?}");
        let extra: Vec<_> = now.keys().filter(|p| !before.contains_key(*p)).collect();
        assert!(extra.is_empty(), "kill {i}: new non-temporary files {extra:?}");
        for t in temps {
            std::fs::remove_file(t).unwrap();
        }
    }
    assert!(killed >= KILLS / 2, "only {killed} of {KILLS} runs were killed before finishing");
    let st = Command::new(BIN)
        .args(["golden", "verify"])
        .env("TIERCHECK_GOLDEN_DIR", &g)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "golden verify failed after the kills");
}

#[test]
fn bless_killed_while_rewriting_leaves_old_or_new_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let g = tmp.path().join("golden");
    copy_dir(&repo_golden(), &g);
    let mpath = g.join("lanes").join("ref").join("manifest.json");
    let original = std::fs::read(&mpath).unwrap();

    // Drop one q4_0 case from the lane, consistently (its entry and its stored output):
    // a refresh of the q4_0 cases must add it back, rewriting the outputs file and the
    // manifest (the re-added entry names this build).
    let mut m: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let entries = m["entries"].as_object_mut().unwrap();
    let victim = entries.keys().find(|k| k.starts_with("q4_0/")).unwrap().clone();
    entries.remove(&victim);
    let old_outputs = g.join("lanes/ref").join(m["outputs_file"].as_str().unwrap());
    let bytes = std::fs::read(&old_outputs).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, safetensors::tensor::TensorView<'_>)> =
        st.tensors().into_iter().filter(|(n, _)| *n != victim).collect();
    let planted_outputs = safetensors::serialize(kept, &None).unwrap();
    std::fs::remove_file(&old_outputs).unwrap();
    std::fs::write(g.join("lanes/ref/outputs-planted.safetensors"), planted_outputs).unwrap();
    m["outputs_file"] = "outputs-planted.safetensors".into();
    let mut planted = serde_json::to_string_pretty(&m).unwrap();
    planted.push('\n');
    let planted = planted.into_bytes();
    std::fs::write(&mpath, &planted).unwrap();
    GoldenDir::new(&g).load_lane("ref").expect("the planted lane is consistent");
    let lane_dir = g.join("lanes").join("ref");
    let planted_dir = tmp.path().join("planted-ref");
    copy_dir(&lane_dir, &planted_dir);
    let restore = || {
        std::fs::remove_dir_all(&lane_dir).unwrap();
        copy_dir(&planted_dir, &lane_dir);
    };
    let full = timed(bless(&g, Some("q4_0/")));
    let renewed = std::fs::read(&mpath).unwrap();
    let back: serde_json::Value = serde_json::from_slice(&renewed).unwrap();
    assert!(back["entries"].get(&victim).is_some(), "the refresh restores {victim}");

    let mut saw_old = 0;
    for (i, f) in fractions(0x5eed_0002).into_iter().enumerate() {
        restore();
        kill_after(bless(&g, Some("q4_0/")), full.mul_f64(f));
        let now = std::fs::read(&mpath).unwrap();
        assert!(
            now == planted || now == renewed,
            "kill {i} at {f:.2}: a manifest neither old nor new"
        );
        saw_old += (now == planted) as usize;
        let lane = GoldenDir::new(&g).load_lane("ref").unwrap_or_else(|e| {
            panic!("kill {i} at {f:.2}: the lane no longer loads: {e}");
        });
        for case in lane.manifest.entries.keys() {
            if let Err(e) = lane.expected(case) {
                panic!("kill {i} at {f:.2}: {case}: {e}");
            }
        }
    }
    assert!(saw_old > 0, "no kill landed before the manifest was replaced");
}

#[test]
fn trace_write_killed_at_random_points_is_absent_or_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("trace.safetensors");
    let run = || {
        let mut c = Command::new(BIN);
        c.args(["run", "--lane", "ref", "--impl", "portable", "--teacher-force", "17,2045,388"])
            .args(["--steps", "4", "--quiet", "--out"])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let full = timed(run());
    tiercheck_model::sequence::read_trace(&out).expect("a finished run's trace loads");
    let mut absent = 0;
    for (i, f) in fractions(0x5eed_0003).into_iter().enumerate() {
        let _ = std::fs::remove_file(&out);
        kill_after(run(), full.mul_f64(f));
        if out.exists() {
            if let Err(e) = tiercheck_model::sequence::read_trace(&out) {
                panic!("kill {i} at {f:.2}: a trace file that does not load: {e}");
            }
        } else {
            absent += 1;
        }
    }
    assert!(absent > 0, "no kill landed before the trace was written");
}
