//! ggml's own CUDA kernels against the `cuda-sm90` twin on a device (libtest-mimic).
//!
//! `ci/ggml-gpu-driver` builds `device/ggml_gpu_check.cu` with ggml's `mmvq.cu`,
//! `quantize.cu`, `norm.cu`, `unary.cu`, `rope.cu` and `softmax.cu` (unchanged, ggml's
//! CUDA flags) into `<TIERCHECK_GGML_GPU>/driver/ggml_gpu_check` (or
//! `TIERCHECK_GGML_DRIVER` names the binary). The trial `ggml device cuda-sm90` writes
//! the cases of [`tiercheck_gpu_testkit::ggml_cases`] (inputs and the twin's outputs) and runs
//! the binary on them: every op through ggml's own host entry point, every output equal
//! to the twin's bit for bit.
//!
//! Without a CUDA device the binary says so (exit 3) and the trial is ignored with its
//! reason, unless `TIERCHECK_REQUIRE_DEVICE` names `cuda-sm90`; without the binary it is
//! ignored, or fails under `TIERCHECK_REQUIRE_HIP=1` (CI builds it).
//!
//! Two trials need no device: `ggml device driver refuses a truncated file` (the binary
//! reads the whole vectors file before it looks for a device, and a file cut short must
//! stop it with exit 2 and a message naming the file), and `ggml device driver compares
//! as specified` (`--replay`: every case's own twin output must compare equal, and an
//! alternative recipe's differing output unequal, with that alternative named: the
//! comparison and the report a device run relies on).

use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

const LANE: &str = "cuda-sm90";

fn env_is(name: &str, want: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == want)
}

fn required_on_device() -> bool {
    std::env::var("TIERCHECK_REQUIRE_DEVICE")
        .is_ok_and(|v| v.split(',').map(str::trim).any(|l| l == LANE))
}

/// The driver binary, or why there is none.
fn driver() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("TIERCHECK_GGML_DRIVER") {
        return Ok(PathBuf::from(p));
    }
    let dir = std::env::var_os("TIERCHECK_GGML_GPU")
        .ok_or("neither TIERCHECK_GGML_DRIVER nor TIERCHECK_GGML_GPU is set (ci/ggml-gpu-driver builds the driver)")?;
    let p = PathBuf::from(dir).join("driver").join("ggml_gpu_check");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{} not found (run ci/ggml-gpu-driver)", p.display()))
    }
}

fn run_driver(bin: &PathBuf) -> Result<Completion, Failed> {
    let dir = std::env::temp_dir().join(format!("tiercheck-ggml-device-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let vectors = dir.join("ggml_vectors.bin");
    std::fs::write(&vectors, tiercheck_gpu_testkit::ggml_cases::vectors())
        .map_err(|e| format!("{}: {e}", vectors.display()))?;
    let out = Command::new(bin).arg(&vectors).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(Completion::Completed),
        Some(3) => {
            let why = stdout.lines().last().unwrap_or("no CUDA device").trim().to_string();
            if required_on_device() {
                Err(format!("TIERCHECK_REQUIRE_DEVICE names {LANE}: {why}").into())
            } else {
                Ok(Completion::ignored_with(why))
            }
        }
        Some(1) => {
            let differ: Vec<&str> = stdout
                .lines()
                .filter(|l| l.starts_with("case ") && !l.ends_with(": equal"))
                .collect();
            let summary: Vec<&str> = stdout.lines().skip_while(|l| *l != "summary").collect();
            Err(format!(
                "ggml's kernels differ from the {LANE} twin:\n  {}\n{}",
                differ.join("\n  "),
                summary.join("\n")
            )
            .into())
        }
        code => Err(format!(
            "{} exited {code:?}\n{}{}",
            bin.display(),
            stdout.trim_end(),
            stderr.trim_end()
        )
        .into()),
    }
}

/// The driver on the first 1000 bytes of a vectors file: exit 2, the file named.
fn truncated_file(bin: &PathBuf) -> Result<(), Failed> {
    let dir = std::env::temp_dir().join(format!("tiercheck-ggml-truncated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join("cut.bin");
    let whole = tiercheck_gpu_testkit::ggml_cases::vectors();
    std::fs::write(&file, &whole[..1000]).map_err(|e| format!("{}: {e}", file.display()))?;
    let out = Command::new(bin).arg(&file).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("{}: {e}", bin.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) || !stderr.contains("cut.bin") || !stderr.contains("truncated")
    {
        return Err(format!(
            "a truncated vectors file: exit {:?}, stderr {stderr:?} (want 2 and the file named)",
            out.status.code()
        )
        .into());
    }
    Ok(())
}

/// The driver's `--replay` on the cases: exit 0 and no wrong verdict.
fn replay(bin: &PathBuf) -> Result<(), Failed> {
    let dir = std::env::temp_dir().join(format!("tiercheck-ggml-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join("ggml_vectors.bin");
    std::fs::write(&file, tiercheck_gpu_testkit::ggml_cases::vectors())
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let out = Command::new(bin).arg("--replay").arg(&file).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    if out.status.code() != Some(0) || !last.ends_with(" 0 wrong verdicts") {
        let wrong: Vec<&str> = stdout.lines().filter(|l| l.starts_with("replay:")).collect();
        return Err(
            format!("--replay exited {:?}:\n  {}", out.status.code(), wrong.join("\n  ")).into()
        );
    }
    // Some case must have had an alternative to reject, or the check checked nothing.
    if !stdout.contains("the device equals: ") {
        return Err("--replay compared no differing alternative".into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let names = [
        format!("ggml device {LANE}"),
        "ggml device driver refuses a truncated file".to_string(),
        "ggml device driver compares as specified".to_string(),
    ];
    let trials = match driver() {
        Ok(bin) => {
            let (b1, b2) = (bin.clone(), bin.clone());
            vec![
                Trial::ignorable_test(names[0].clone(), move || run_driver(&bin)),
                Trial::test(names[1].clone(), move || truncated_file(&b1)),
                Trial::test(names[2].clone(), move || replay(&b2)),
            ]
        }
        Err(why) => names
            .into_iter()
            .map(|name| {
                let why = why.clone();
                if env_is("TIERCHECK_REQUIRE_HIP", "1") {
                    Trial::test(name, move || {
                        Err(format!("TIERCHECK_REQUIRE_HIP=1 but {why}").into())
                    })
                } else {
                    Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
                }
            })
            .collect(),
    };
    libtest_mimic::run(&args, trials).exit();
}
