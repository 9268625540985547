//! The one-line progress display on stderr of the long commands (`matrix`, `run`,
//! `delta`, `attribute`, `golden`).

use std::io::Write;
use std::time::Instant;

/// A one-line progress display on stderr (no-op when `quiet`).
pub struct Progress {
    total: usize,
    done: usize,
    quiet: bool,
    start: Instant,
}

impl Progress {
    /// A bar for `total` units.
    pub fn new(total: usize, quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let quiet = quiet || !std::io::stderr().is_terminal();
        Progress { total, done: 0, quiet, start: Instant::now() }
    }

    /// Advance by one unit, labelled.
    pub fn tick(&mut self, label: &str) {
        self.done += 1;
        self.show(label);
    }

    /// Set the units done (at most the total), labelled.
    pub fn set(&mut self, done: usize, label: &str) {
        self.done = done.min(self.total);
        self.show(label);
    }

    /// Redraw with a label.
    pub fn show(&self, label: &str) {
        if self.quiet {
            return;
        }
        let width = 30;
        let filled = (self.done * width).checked_div(self.total).unwrap_or(width);
        let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
        let elapsed = self.start.elapsed().as_secs_f64();
        // The time left at the pace so far, once a unit is done.
        let eta = if self.done > 0 && self.done < self.total {
            format!(" ETA {:.0}s", elapsed * (self.total - self.done) as f64 / self.done as f64)
        } else {
            String::new()
        };
        let mut e = std::io::stderr();
        let _ =
            write!(e, "\r[{bar}] {}/{} {elapsed:>6.1}s{eta} {label:<48}", self.done, self.total,);
        let _ = e.flush();
    }

    /// End the line.
    pub fn finish(&self) {
        if !self.quiet {
            eprintln!();
        }
    }
}
