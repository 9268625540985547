//! `docs/mutants-*.txt`, the summaries `ci/mutants` writes, against
//! `docs/CORRECTNESS.md`: the counts of each summary add up, and every mutant a summary
//! lists as not caught has its reason in CORRECTNESS.md (named there in backticks,
//! exactly as cargo-mutants names it).

use std::path::Path;

/// One summary: the number of mutants tested, the sum of the outcome counts, and the
/// mutants not caught.
#[derive(Debug)]
struct Summary {
    tested: usize,
    outcomes: usize,
    listed_counts: usize,
    survivors: Vec<String>,
}

fn parse(text: &str) -> Result<Summary, String> {
    let mut tested = None;
    let (mut outcomes, mut listed_counts) = (0, 0);
    let mut survivors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("missed: ").or_else(|| line.strip_prefix("timeout: "))
        {
            survivors.push(name.to_string());
            continue;
        }
        let (key, value) =
            line.rsplit_once(": ").ok_or_else(|| format!("line {}: not `key: value`", i + 1))?;
        let n: usize =
            value.parse().map_err(|_| format!("line {}: `{value}` is not a count", i + 1))?;
        match key {
            "mutants tested" => tested = Some(n),
            "caught by the kernel goldens"
            | "caught by the whole set"
            | "unviable (does not build)" => outcomes += n,
            "missed (listed below)" | "timed out (listed below)" => {
                outcomes += n;
                listed_counts += n;
            }
            _ => return Err(format!("line {}: unknown count `{key}`", i + 1)),
        }
    }
    let tested = tested.ok_or("no `mutants tested` line")?;
    Ok(Summary { tested, outcomes, listed_counts, survivors })
}

/// The problems of one summary against the text of CORRECTNESS.md.
fn problems(file: &str, text: &str, correctness: &str) -> Vec<String> {
    let s = match parse(text) {
        Ok(s) => s,
        Err(e) => return vec![format!("{file}: {e}")],
    };
    let mut out = Vec::new();
    if s.outcomes != s.tested {
        out.push(format!("{file}: the outcomes add up to {}, not {} tested", s.outcomes, s.tested));
    }
    if s.listed_counts != s.survivors.len() {
        out.push(format!(
            "{file}: {} mutants counted as not caught, {} listed",
            s.listed_counts,
            s.survivors.len()
        ));
    }
    for m in &s.survivors {
        if !correctness.contains(&format!("`{m}`")) {
            out.push(format!("{file}: `{m}` has no reason in docs/CORRECTNESS.md"));
        }
    }
    out
}

#[test]
fn every_surviving_mutant_has_its_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let correctness = std::fs::read_to_string(root.join("docs/CORRECTNESS.md")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("mutants-") && n.ends_with(".txt"))
        .collect();
    files.sort();
    assert!(files.contains(&"mutants-attention.txt".to_string()), "summaries: {files:?}");
    let mut all = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(root.join("docs").join(f)).unwrap();
        all.extend(problems(f, &text, &correctness));
    }
    assert!(all.is_empty(), "{}", all.join("\n"));

    // The checks see an unexplained mutant, counts that do not add up, and a bad line.
    let good = "# x\nmutants tested: 3\ncaught by the kernel goldens: 1\ncaught by the whole \
                set: 0\nunviable (does not build): 1\nmissed (listed below): 1\ntimed out \
                (listed below): 0\nmissed: a.rs:1:1: replace f -> u8 with 0\n";
    assert!(problems("s", good, "`a.rs:1:1: replace f -> u8 with 0`: unused").is_empty());
    assert_eq!(problems("s", good, "nothing").len(), 1);
    let short = good.replace("tested: 3", "tested: 4");
    assert!(problems("s", &short, "`a.rs:1:1: replace f -> u8 with 0`")[0].contains("add up"));
    let unlisted = good.replace("missed: a.rs", "# a.rs");
    assert!(problems("s", &unlisted, "")[0].contains("1 mutants counted as not caught, 0 listed"));
    assert!(problems("s", "caught: x\n", "")[0].contains("not a count"));
}
