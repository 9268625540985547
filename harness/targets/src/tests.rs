use std::process::Command;

use super::*;

const FILE: &str = "targets/aarch64-unknown-linux-gnu.toml";

/// A valid table with two models and two oracle builds.
const GOOD: &str = r#"
triple = "aarch64-unknown-linux-gnu"
lanes = ["ref", "a-plain", "a-repack", "b-plain"]

[tier_model]
"a-plain" = "m-a"

[[model]]
name = "m-a"
qemu_cpu = "cpu-a"
require = ["a-plain", "a-repack"]

[[model]]
name = "m-b"
qemu_cpu = "max,sve=off"
require = ["a-plain", "b-plain"]

[[tier]]
name = "t-a"
march = "armv8.2-a+dotprod"
model = "m-a"
info = ["i8mm=0", "sve_cnt=0"]
env = "ENV_A"
llama_env = "LLAMA_ENV_A"
proves = ["a-plain", "a-repack"]

[[tier]]
name = "t-b"
march = "armv8.6-a+i8mm"
model = "m-b"
info = ["i8mm=1", "sve=1", "sve_cnt=32"]
env = "ENV_B"
llama_env = "LLAMA_ENV_B"
proves = ["b-plain"]
"#;

/// The `info` of `t-a` in `GOOD`.
const A_INFO: &str = r#"["i8mm=0", "sve_cnt=0"]"#;

fn good() -> TargetTable {
    parse(Path::new(FILE), GOOD).unwrap()
}

/// The error `text` gives; it must name the file.
fn bad(text: &str) -> String {
    let e = parse(Path::new(FILE), text).expect_err("accepted").to_string();
    assert!(e.starts_with(FILE), "the error does not name the file: {e}");
    e
}

/// `GOOD` with `from` replaced by `to` (which must occur).
fn edit(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    GOOD.replacen(from, to, 1)
}

#[test]
fn committed_tables_parse() {
    for triple in ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"] {
        let t = load(&targets_dir(), triple).unwrap();
        assert!(!t.models.is_empty());
        assert!(t.path.ends_with(format!("{triple}.toml")));
    }
    let arm = load_arch("aarch64").unwrap();
    let names: Vec<&str> = arm.tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["arm-dotprod", "arm-i8mm", "arm-sve128", "arm-sve256"]);
    let i8mm = arm.tier("arm-i8mm").unwrap();
    assert_eq!(arm.tier_qemu_cpu(i8mm), "max,sve=off");
    assert_eq!(i8mm.env, "TIERCHECK_ORACLE_ARM_I8MM");
    assert_eq!(i8mm.info_words(), "i8mm=1 sve=0 sve_cnt=0 fma=1 fp16_va=0");
    assert_eq!(arm.tier("arm-sve256").unwrap().info_value("sve_cnt"), Some(32));
}

#[test]
fn a_good_table_reads_back() {
    let t = good();
    assert_eq!(t.tiers.len(), 2);
    let b = t.tier("t-b").unwrap();
    assert_eq!(b.march, "armv8.6-a+i8mm");
    assert_eq!(t.tier_qemu_cpu(b), "max,sve=off");
    assert_eq!(b.info_words(), "i8mm=1 sve=1 sve_cnt=32");
    assert_eq!(b.info_value("sve"), Some(1));
    assert_eq!(b.info_value("fma"), None);
    assert_eq!(b.proves, ["b-plain"]);
    assert!(t.tier("t-c").is_none());
    assert_eq!(t.model_for("a-plain").unwrap().name, "m-a");
    assert_eq!(t.model_for("b-plain").unwrap().name, "m-b");
    // A table without [[tier]] has none.
    let plain = GOOD.split("[[tier]]").next().unwrap();
    assert!(parse(Path::new(FILE), plain).unwrap().tiers.is_empty());
}

#[test]
fn table_errors_name_the_file_and_the_problem() {
    let x86 = Path::new("targets/x86_64-unknown-linux-gnu.toml");
    let base = "triple = \"x86_64-unknown-linux-gnu\"\nlanes = [\"ref\"]\n";
    let e = parse(x86, "triple = 3").unwrap_err().to_string();
    assert!(e.contains("x86_64-unknown-linux-gnu.toml"), "{e}");
    assert!(parse(x86, base).unwrap_err().to_string().contains("no [[model]]"));
    let e = parse(x86, &format!("{base}lanes2 = 1\n")).unwrap_err().to_string();
    assert!(e.contains("unknown field"), "{e}");
    let cases: &[(String, &str)] = &[
        (edit("aarch64-unknown-linux-gnu", "x"), "does not match the file name"),
        (edit("\"ref\", ", "\"ref\", \"ref\", "), "lane `ref` is listed twice"),
        (edit("require = [\"a-plain\", \"a-repack\"]", "require = [\"zz\"]"), "requires `zz`"),
        (edit("name = \"m-b\"", "name = \"m-a\""), "duplicate model `m-a`"),
        (edit("\"a-plain\" = \"m-a\"", "\"a-plain\" = \"m-x\""), "no [[model]] named `m-x`"),
        // [[tier]]
        (edit("env = \"ENV_A\"", "env = \"ENV_A\"\ncolour = 1"), "unknown field `colour`"),
        (edit("march = \"armv8.2-a+dotprod\"\n", ""), "missing field `march`"),
        (edit("name = \"t-b\"", "name = \"t-a\""), "duplicate tier `t-a`"),
        (edit("name = \"t-b\"", "name = \"../t\""), "tier name `../t`"),
        (edit("name = \"t-b\"", "name = \"\""), "tier name ``"),
        (edit("march = \"armv8.6-a+i8mm\"", "march = \"armv8 x\""), "is not a -march value"),
        (edit("model = \"m-b\"", "model = \"m-z\""), "tier `t-b`: no [[model]] named `m-z`"),
        (edit("env = \"ENV_B\"", "env = \"env b\""), "`env b` is not an environment variable"),
        (edit("llama_env = \"LLAMA_ENV_B\"", "llama_env = \"9X\""), "`9X` is not an env"),
        (edit("env = \"ENV_B\"", "env = \"ENV_A\""), "oracle.env key `ENV_A` is used twice"),
        (edit("llama_env = \"LLAMA_ENV_B\"", "llama_env = \"ENV_B\""), "`ENV_B` is used twice"),
        (edit(A_INFO, "[]"), "tier `t-a`: `info` is empty"),
        (edit(A_INFO, "[\"avx=1\"]"), "info field `avx` is not one"),
        (edit(A_INFO, "[\"i8mm\"]"), "info `i8mm` is not `field=value`"),
        (edit(A_INFO, "[\"i8mm=1\", \"i8mm=0\"]"), "info field `i8mm` is given twice"),
        (edit(A_INFO, "[\"i8mm=2\"]"), "info `i8mm=2`: `i8mm` takes 0 or 1"),
        (edit(A_INFO, "[\"sve_cnt=24\"]"), "`sve_cnt` takes a byte count"),
        (edit(A_INFO, "[\"sve_cnt=x\"]"), "`sve_cnt` takes a byte count"),
        (edit(A_INFO, "{ i8mm = 1 }"), "invalid type"),
        (edit("proves = [\"b-plain\"]", "proves = []"), "tier `t-b`: `proves` is empty"),
        (edit("proves = [\"b-plain\"]", "proves = [\"zz\"]"), "proves `zz`, which is not in"),
        (
            edit("proves = [\"b-plain\"]", "proves = [\"b-plain\", \"a-repack\"]"),
            "lane `a-repack` is proved by two tiers, `t-a` and `t-b`",
        ),
        (
            edit("proves = [\"b-plain\"]", "proves = [\"b-plain\", \"b-plain\"]"),
            "lane `b-plain` is proved by two tiers, `t-b` and `t-b`",
        ),
        (
            edit("proves = [\"a-plain\", \"a-repack\"]", "proves = [\"a-repack\"]")
                .replace("proves = [\"b-plain\"]", "proves = [\"b-plain\", \"a-plain\"]"),
            "tier `t-b` runs on model `m-b`, but `a-plain`'s own tier model is `m-a`",
        ),
        (edit("proves = [\"b-plain\"]", "proves = [\"ref\"]"), "which no [[model]] requires"),
    ];
    for (text, want) in cases {
        let e = bad(text);
        assert!(e.contains(want), "want {want:?}, got {e}");
    }
}

#[test]
fn unknown_lanes_are_errors_naming_the_file() {
    let t = good();
    t.check_lanes(|l| l != "nope").unwrap();
    let e = t.check_lanes(|l| l != "b-plain").unwrap_err().to_string();
    assert_eq!(e, format!("{FILE}: unknown lane `b-plain`"));
}

/// Runs `script` in bash and returns its standard output.
fn bash(script: &str) -> String {
    let out = Command::new("bash").arg("-c").arg(script).output().expect("bash runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What bash holds after `eval`ing [`TargetTable::tiers_shell`]: one line per build and
/// fact, `name|var|value`.
fn evaluated(t: &TargetTable, prefix: &str) -> Vec<String> {
    let script = format!(
        "set -eu\neval \"$1\"\nfor t in \"${{{prefix}TIERS[@]}}\"; do\n\
         for v in MARCH QEMU_CPU INFO ENV LLAMA_ENV PROVES; do\n\
         declare -n a={prefix}$v\nprintf '%s|%s|%s\\n' \"$t\" \"$v\" \"${{a[$t]}}\"\n\
         unset -n a\ndone\ndone"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("bash")
        .arg(t.tiers_shell(prefix))
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

/// The same lines straight from the table.
fn expected(t: &TargetTable) -> Vec<String> {
    let mut want = Vec::new();
    for tier in &t.tiers {
        for (var, value) in [
            ("MARCH", tier.march.clone()),
            ("QEMU_CPU", t.tier_qemu_cpu(tier).to_string()),
            ("INFO", tier.info_words()),
            ("ENV", tier.env.clone()),
            ("LLAMA_ENV", tier.llama_env.clone()),
            ("PROVES", tier.proves.join(" ")),
        ] {
            want.push(format!("{}|{var}|{value}", tier.name));
        }
    }
    want
}

#[test]
fn tiers_shell_evaluates_to_the_table() {
    let arm = load_arch("aarch64").unwrap();
    let got = evaluated(&arm, "ARM_");
    assert_eq!(got.len(), 4 * 6);
    assert_eq!(got, expected(&arm));
    assert!(got.contains(&"arm-i8mm|QEMU_CPU|max,sve=off".to_string()), "{got:?}");
    // Values the shell would otherwise split, expand or unquote.
    let tricky = edit("qemu_cpu = \"cpu-a\"", r#"qemu_cpu = "it's $HOME `x` \"a b\"  *""#);
    let t = parse(Path::new(FILE), &tricky).unwrap();
    let got = evaluated(&t, "");
    assert_eq!(got, expected(&t));
    assert!(got.contains(&r#"t-a|QEMU_CPU|it's $HOME `x` "a b"  *"#.to_string()), "{got:?}");
    // The build order survives, and a table without builds gives an empty array.
    assert_eq!(bash(&format!("{}echo \"${{TIERS[*]}}\"", t.tiers_shell(""))), "t-a t-b\n");
    let none = TargetTable { tiers: Vec::new(), ..t };
    assert_eq!(bash(&format!("{}echo \"${{#TIERS[@]}}\"", none.tiers_shell(""))), "0\n");
}

#[test]
fn shell_quote_round_trips() {
    for s in ["", "plain", "a b", "it's", "'", "$(false)", "\\n", "a\nb"] {
        assert_eq!(bash(&format!("printf '%s' {}", shell_quote(s))), s, "{s:?}");
    }
}

const X86_FILE: &str = "targets/x86_64-unknown-linux-gnu.toml";

/// A valid x86-64 table with three oracle builds.
const X86_GOOD: &str = r#"
triple = "x86_64-unknown-linux-gnu"
lanes = ["ref", "v-plain", "v-wide"]

[[model]]
name = "host"
qemu_cpu = ""
require = ["v-plain"]

[[x86_tier]]
name = "plain"
ggml_on = []
ggml_off = ["AVX", "AVX2"]
lib_env = "LIB_PLAIN"
proves = ["ref"]

[[x86_tier]]
name = "vec"
ggml_on = ["AVX", "AVX2"]
ggml_off = ["AVX512"]
lib_env = "LIB_VEC"
llama_env = "LLAMA_VEC"
llama_driver_env = "DRIVER_VEC"
proves = ["v-plain"]

[[x86_tier]]
name = "wide"
ggml_on = ["AVX", "AVX2", "AVX512"]
ggml_off = []
llama_env = "LLAMA_WIDE"
proves = ["v-wide"]
"#;

fn x86_edit(from: &str, to: &str) -> String {
    assert!(X86_GOOD.contains(from), "{from}");
    X86_GOOD.replacen(from, to, 1)
}

#[test]
fn x86_tiers_read_back_and_print_their_cmake_options() {
    let t = parse(Path::new(X86_FILE), X86_GOOD).unwrap();
    let names: Vec<&str> = t.x86_tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["plain", "vec", "wide"]);
    let vec = t.x86_tier("vec").unwrap();
    assert_eq!(vec.cmake_flags(), ["-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_AVX512=OFF"]);
    assert!(vec.has("AVX2") && !vec.has("AVX512"));
    assert_eq!(t.x86_tier("wide").unwrap().lib_env, None);
    let shell = t.tiers_shell("X86_");
    let script = format!(
        "{shell}echo \"${{X86_TIERS[*]}}\"; echo \"${{X86_CMAKE[plain]}}\"; \
         echo \"[${{X86_LIB_ENV[wide]}}] ${{X86_LLAMA_ENV[wide]}} ${{X86_LLAMA_DRIVER_ENV[vec]}}\"; \
         echo \"${{X86_PROVES[vec]}}\""
    );
    assert_eq!(
        bash(&script),
        "plain vec wide\n-DGGML_AVX=OFF -DGGML_AVX2=OFF\n[] LLAMA_WIDE DRIVER_VEC\nv-plain\n"
    );
    // The committed table: the builds ci/oracle makes, in order, with haswell's driver.
    let x86 = load_arch("x86_64").unwrap();
    let names: Vec<&str> = x86.x86_tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["x64", "haswell", "zen4"]);
    assert!(x86.x86_tier("zen4").unwrap().has("AVX512"));
    assert!(!x86.x86_tier("haswell").unwrap().has("AVX512"));
    assert!(x86.x86_tier("x64").unwrap().ggml_on.is_empty());
}

#[test]
fn x86_tier_errors_name_the_file_and_the_problem() {
    let cases: &[(String, &str)] = &[
        (
            x86_edit("lib_env = \"LIB_PLAIN\"", "lib_env = \"LIB_PLAIN\"\nmarch = \"x\""),
            "unknown field `march`",
        ),
        (x86_edit("ggml_on = []\n", ""), "missing field `ggml_on`"),
        (x86_edit("name = \"vec\"", "name = \"plain\""), "duplicate x86_tier `plain`"),
        (x86_edit("name = \"vec\"", "name = \"a/b\""), "x86_tier name `a/b`"),
        (
            x86_edit("ggml_off = [\"AVX512\"]", "ggml_off = [\"AVX2\"]"),
            "option `AVX2` is given twice",
        ),
        (
            x86_edit("ggml_off = [\"AVX512\"]", "ggml_off = [\"avx 512\"]"),
            "`avx 512` is not a ggml cmake option",
        ),
        (x86_edit("lib_env = \"LIB_PLAIN\"\n", ""), "x86_tier `plain`: builds nothing"),
        (
            x86_edit("llama_env = \"LLAMA_WIDE\"", "llama_env = \"LIB_VEC\""),
            "`LIB_VEC` is used twice",
        ),
        (
            x86_edit("lib_env = \"LIB_VEC\"", "lib_env = \"lib vec\""),
            "`lib vec` is not an environment",
        ),
        (
            x86_edit(
                "llama_env = \"LLAMA_WIDE\"",
                "llama_env = \"LLAMA_WIDE\"\nllama_driver_env = \"D2\"",
            ),
            "the llama.cpp driver is built twice, for `vec` and `wide`",
        ),
        (
            x86_edit(
                "lib_env = \"LIB_PLAIN\"",
                "lib_env = \"LIB_PLAIN\"\nllama_driver_env = \"D2\"",
            ),
            "a llama.cpp driver needs a llama.cpp build",
        ),
        (x86_edit("proves = [\"v-wide\"]", "proves = []"), "x86_tier `wide`: `proves` is empty"),
        (x86_edit("proves = [\"v-wide\"]", "proves = [\"zz\"]"), "proves `zz`, which is not in"),
        (
            x86_edit("proves = [\"v-wide\"]", "proves = [\"v-plain\"]"),
            "proved by two tiers, `vec` and `wide`",
        ),
    ];
    for (text, want) in cases {
        let e = parse(Path::new(X86_FILE), text).expect_err("accepted").to_string();
        assert!(e.starts_with(X86_FILE), "the error does not name the file: {e}");
        assert!(e.contains(want), "want {want:?}, got {e}");
    }
    // Each kind of build only in its own architecture's table.
    let e = bad(&format!("{GOOD}\n[[x86_tier]]\nname = \"v\"\nggml_on = []\nggml_off = []\nlib_env = \"L\"\nproves = [\"ref\"]\n"));
    assert!(e.contains("this table is not x86-64's"), "{e}");
    let arm_tier = GOOD.split_once("[[tier]]").unwrap().1.split("[[tier]]").next().unwrap();
    let text = format!("{X86_GOOD}\n[[tier]]{arm_tier}");
    let e = parse(Path::new(X86_FILE), &text).expect_err("accepted").to_string();
    assert!(e.contains("this table is not aarch64's"), "{e}");
}
