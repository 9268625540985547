//! One test binary, several suites: trial names and libtest's command line.
//!
//! The cli package's libtest-mimic suites (the goldens, the model goldens, the oracle
//! suites, ...) are modules of one test binary, `trials`, so that the product links once
//! for all of them. A trial's name is `<suite>::<name in the suite>` ([`trial_name`]),
//! the way libtest names a test by its module path, so `cargo test -p tiercheck --test
//! trials -- golden::` runs one suite and nextest's `test(/^golden::/)` selects it.
//!
//! [`Selection`] reads libtest's command line as libtest itself does, several filters
//! included: a trial runs when its name contains any of the filters (equals one, with
//! `--exact`) and none of the `--skip` strings. libtest-mimic takes one filter; the others
//! are applied here before it runs (so with several filters the summary counts the
//! trials they leave out as not there at all: "0 filtered out"). `-- golden:: threads::`
//! thus runs two suites, and
//! `-- native --skip model::` the native trials of every suite but one.

use std::ffi::OsString;
use std::process::ExitCode;

use libtest_mimic::{Arguments, Conclusion, Trial};

/// The name of trial `rest` of `suite`: `<suite>::<rest>`.
pub fn trial_name(suite: &str, rest: impl std::fmt::Display) -> String {
    format!("{suite}::{rest}")
}

/// The name of `name` within `suite`, when it is one of that suite's trials.
pub fn within<'a>(suite: &str, name: &'a str) -> Option<&'a str> {
    name.strip_prefix(suite)?.strip_prefix("::")
}

/// libtest's options that take a value as the next argument (`--skip x`, not `--skip=x`).
const VALUED: &[&str] = &["--test-threads", "--logfile", "--skip", "--color", "--format", "-Z"];

/// Which trials a run of the binary asks for, and how it reports them.
#[derive(Clone, Debug)]
pub struct Selection {
    args: Arguments,
    filters: Vec<String>,
}

impl Selection {
    /// The selection of this process's command line (libtest's syntax; any number of
    /// filters).
    pub fn from_env() -> Selection {
        Selection::parse(std::env::args_os())
    }

    /// The selection of `argv` (its first element is the program). A malformed option
    /// ends the process with libtest-mimic's usage message, as libtest does.
    pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Selection {
        let mut argv = argv.into_iter();
        let mut options: Vec<OsString> = argv.next().into_iter().collect();
        let mut filters = Vec::new();
        while let Some(a) = argv.next() {
            let s = a.to_string_lossy().into_owned();
            if s == "--" {
                filters.extend(argv.by_ref().map(|a| a.to_string_lossy().into_owned()));
                break;
            }
            if VALUED.contains(&s.as_str()) {
                options.push(a);
                options.extend(argv.next());
            } else if s.starts_with('-') && s.len() > 1 {
                options.push(a);
            } else {
                filters.push(s);
            }
        }
        Selection { args: Arguments::from_iter(options), filters }
    }

    /// The filters given (empty: every trial).
    pub fn filters(&self) -> &[String] {
        &self.filters
    }

    /// Whether `trial` is left out by the filters, the `--skip` strings or `--ignored`.
    pub fn is_filtered_out(&self, trial: &Trial) -> bool {
        if self.filters.is_empty() {
            return self.args.is_filtered_out(trial);
        }
        self.filters.iter().all(|f| {
            let one = Arguments { filter: Some(f.clone()), ..self.args.clone() };
            one.is_filtered_out(trial)
        })
    }

    /// Whether `trial` is selected but not run (marked ignored, and `--ignored` /
    /// `--include-ignored` not given).
    pub fn is_ignored(&self, trial: &Trial) -> bool {
        self.args.is_ignored(trial)
    }

    /// Run the selected trials of `trials` (libtest-mimic's run and report).
    pub fn conclude(&self, mut trials: Vec<Trial>) -> Conclusion {
        let mut args = self.args.clone();
        match self.filters.as_slice() {
            [] => {}
            [one] => args.filter = Some(one.clone()),
            _ => trials.retain(|t| !self.is_filtered_out(t)),
        }
        libtest_mimic::run(&args, trials)
    }

    /// [`Selection::conclude`], as the process's exit code.
    pub fn run(&self, trials: Vec<Trial>) -> ExitCode {
        self.conclude(trials).exit_code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(args: &[&str]) -> Selection {
        Selection::parse(std::iter::once("bin").chain(args.iter().copied()).map(OsString::from))
    }

    fn names(s: &Selection, all: &[&str]) -> Vec<String> {
        all.iter()
            .map(|n| Trial::test(*n, || Ok(())))
            .filter(|t| !s.is_filtered_out(t))
            .map(|t| t.name().to_string())
            .collect()
    }

    const ALL: &[&str] = &[
        "golden::ref/q4_0/gemv/k=256",
        "golden::x86_64-avx2/q4_0/gemv/k=256/native",
        "threads::x86_64-avx2/native",
        "model::x86_64-avx2/native/p0",
        "model::x86_64-avx2/portable/p0",
    ];

    #[test]
    fn filters_are_any_of_and_skips_all_of() {
        assert_eq!(names(&sel(&[]), ALL).len(), ALL.len());
        assert_eq!(names(&sel(&["golden::"]), ALL), &ALL[..2]);
        assert_eq!(names(&sel(&["golden::", "threads::"]), ALL), &ALL[..3]);
        assert_eq!(names(&sel(&["native", "--skip", "model::"]), ALL), &ALL[1..3]);
        assert_eq!(names(&sel(&["--skip=model", "--", "native"]), ALL), &ALL[1..3]);
        assert_eq!(
            names(&sel(&["--exact", "threads::x86_64-avx2/native", "nothing"]), ALL),
            &ALL[2..3]
        );
        assert!(names(&sel(&["--test-threads", "2", "nothing"]), ALL).is_empty());
    }

    #[test]
    fn names_carry_their_suite() {
        let n = trial_name("oracle_ref", "oracle/x64/quantize/q4_0");
        assert_eq!(n, "oracle_ref::oracle/x64/quantize/q4_0");
        assert_eq!(within("oracle_ref", &n), Some("oracle/x64/quantize/q4_0"));
        assert_eq!(within("oracle", &n), None);
        assert_eq!(within("golden", &n), None);
    }
}
