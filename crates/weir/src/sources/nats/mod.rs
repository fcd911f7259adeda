//! `type = "nats"`: a NATS JetStream durable pull consumer (credits are
//! `max_ack_pending`, acked once durable). Not built yet: [`NatsConfig`] reads and
//! checks its keys, and the registry refuses the type.

mod config;

pub use self::config::NatsConfig;
