//! A token bucket per user, pure: capacity `burst`, refilled at `per_sec`. The clock is passed
//! in, so the arithmetic is tested without sleeping.

use std::collections::HashMap;
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug)]
pub struct RateLimiter {
    per_sec: f64,
    burst: f64,
    buckets: HashMap<String, Bucket>,
}

/// Users tracked before idle (full) buckets are dropped.
const PRUNE_ABOVE: usize = 10_000;

impl RateLimiter {
    pub fn new(per_sec: f64, burst: u32) -> Self {
        Self {
            per_sec,
            burst: f64::from(burst.max(1)),
            buckets: HashMap::new(),
        }
    }

    /// Takes one token for `user`. `Err(seconds)` says how long until one is available.
    pub fn take(&mut self, user: &str, now: Instant) -> Result<(), u64> {
        if self.per_sec <= 0.0 {
            return Ok(());
        }
        if self.buckets.len() > PRUNE_ABOVE {
            let (per_sec, burst) = (self.per_sec, self.burst);
            self.buckets
                .retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec < burst);
        }
        let b = self.buckets.entry(user.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let refill = now.duration_since(b.at).as_secs_f64() * self.per_sec;
        b.tokens = (b.tokens + refill).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - b.tokens) / self.per_sec).ceil();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Err((wait as u64).max(1))
        }
    }

    /// Returns a token taken for a request that then failed (a quota refusal, an outage): only
    /// presigns that issue a URL cost the caller anything.
    pub fn give_back(&mut self, user: &str) {
        if let Some(b) = self.buckets.get_mut(user) {
            b.tokens = (b.tokens + 1.0).min(self.burst);
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_token_given_back_can_be_taken_again_but_never_past_the_burst() {
        let t = Instant::now();
        let mut l = RateLimiter::new(0.001, 2);
        assert!(l.take("u", t).is_ok());
        assert!(l.take("u", t).is_ok());
        assert!(l.take("u", t).is_err());
        l.give_back("u");
        assert!(l.take("u", t).is_ok());
        assert!(l.take("u", t).is_err());
        for _ in 0..5 {
            l.give_back("u");
        }
        assert!(l.take("u", t).is_ok());
        assert!(l.take("u", t).is_ok());
        assert!(l.take("u", t).is_err(), "never more than the burst");
        l.give_back("nobody");
    }

    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_then_the_refill_rate_per_user() {
        let mut r = RateLimiter::new(2.0, 3);
        let t = Instant::now();
        for _ in 0..3 {
            assert!(r.take("alice", t).is_ok());
        }
        assert_eq!(r.take("alice", t), Err(1));
        assert!(r.take("bob", t).is_ok(), "others are served");
        assert!(r.take("alice", t + Duration::from_millis(500)).is_ok());
        assert!(r.take("alice", t + Duration::from_millis(500)).is_err());
        // Idle time refills up to the burst, not beyond.
        let later = t + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(r.take("alice", later).is_ok());
        }
        assert!(r.take("alice", later).is_err());
    }

    #[test]
    fn a_zero_rate_means_unlimited() {
        let mut r = RateLimiter::new(0.0, 1);
        let t = Instant::now();
        for _ in 0..100 {
            assert!(r.take("alice", t).is_ok());
        }
    }
}
