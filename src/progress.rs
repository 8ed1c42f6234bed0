//! A progress bar for the commands that work for long (`facts import` and
//! `enrich`, `store copy`, `jobs run`): counts, elapsed time and time left,
//! on stderr, for a person at a terminal only. Piped, under `TERM=dumb`
//! (indicatif hides its own bar there) or with `--quiet`, nothing is
//! drawn, so what a pipeline or a log reads is the same with or without it.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether a command may draw bars: the global flags' verdict, handed from
/// `cmd` to whoever draws.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bars {
    shown: bool,
}

impl Bars {
    /// `-v` turns bars off too: log lines and a bar redrawn in place on one
    /// stderr would tear each other.
    pub(crate) fn new(quiet: bool, verbose: u8) -> Bars {
        Bars {
            shown: !quiet && verbose == 0,
        }
    }

    /// Never drawn (the tests' bars).
    #[cfg(test)]
    pub(crate) fn off() -> Bars {
        Bars { shown: false }
    }

    /// A bar of `len` steps, each one of `unit` ("facts", "jobs"), named `what`.
    pub(crate) fn bar(self, what: &str, len: u64, unit: &'static str) -> Progress {
        let target = if self.shown {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len), target)
            .with_style(style(&format!(
                "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit}, {{eta}} left {{msg}}"
            )))
            .with_prefix(what.to_string());
        // A side call takes many seconds: redraw meanwhile, so the elapsed
        // time and the estimate move and the bar is not taken for stuck.
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(500));
        }
        Progress { bar, unit }
    }
}

/// No colour, so `NO_COLOR` has nothing to turn off.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("the bar templates are fixed and valid")
        .progress_chars("=> ")
}

/// One bar. Dropped unfinished (an error), it is cleared, so the error
/// message stands alone.
pub(crate) struct Progress {
    bar: ProgressBar,
    unit: &'static str,
}

impl Progress {
    pub(crate) fn inc(&self, steps: u64) {
        self.bar.inc(steps);
    }

    /// Set how far it is; the length grows when work turned out to be more
    /// than counted (a job retried within the run).
    pub(crate) fn set_position(&self, at: u64) {
        if self.bar.length().is_some_and(|len| at > len) {
            self.bar.set_length(at);
        }
        self.bar.set_position(at);
    }

    /// More steps than counted at the start (work queued along the way).
    pub(crate) fn add_length(&self, steps: u64) {
        self.bar.inc_length(steps);
    }

    /// What it is on now ("agent bot"), after the counts.
    pub(crate) fn set_message(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// Leave a last line that says how much took how long, drawn whatever
    /// the refresh rate allowed before; the command's summary follows it.
    /// The count stays where the work got (indicatif's `finish` would fill
    /// the bar): jobs another worker holds were not run here.
    pub(crate) fn finish(self) {
        self.bar.set_style(style(&format!(
            "{{prefix}} {{pos}}/{{len}} {} in {{elapsed}}",
            self.unit
        )));
        self.bar.abandon();
    }
}
