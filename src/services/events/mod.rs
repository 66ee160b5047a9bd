//! Events after they are written: the sequencer that positions committed outbox rows and fans
//! them out to the endpoints' deliveries, the workers that deliver them, and the pull feed's
//! reading of them.

pub mod delivery;
pub mod feed;
pub mod redeliver;
pub mod sequencer;
