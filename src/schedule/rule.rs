//! Temporary stand-in until the real rule engine lands.
use chrono_tz::Tz;

/// A recurrence rule.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
}

/// A rule problem.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// Malformed.
    #[error("{0}")]
    Invalid(String),
}

impl Rule {
    /// Parses.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        if !text.to_ascii_uppercase().contains("FREQ=") {
            return Err(RuleError::Invalid("missing FREQ".into()));
        }
        Ok(Rule {
            text: text.to_string(),
        })
    }
    /// Next.
    pub fn next_after(&self, after: i64, _tz: Tz) -> Result<Option<i64>, RuleError> {
        let step = if self.text.to_ascii_uppercase().contains("SECONDLY") {
            1
        } else {
            60
        };
        Ok(Some(after - after.rem_euclid(step) + step))
    }
    /// Zone.
    pub fn zone(&self) -> Option<Tz> {
        None
    }
}
