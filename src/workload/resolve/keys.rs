//! The keys a class may have, each named once, and a class's entries looked up by them.

use crate::workload::yaml::Node;

/// The keys a class may have, each named once: the list of them that unknown keys are
/// checked against, and a [`ClassKeys`] with a field per key, looked up once, that every
/// reader takes its key from.
macro_rules! class_keys {
    ($($key:ident),* $(,)?) => {
        pub(super) const CLASS_KEYS: &[&str] = &[$(stringify!($key)),*];

        /// A class's node and its entries by key (`None`: not given).
        pub(super) struct ClassKeys<'n> {
            /// The class's own node, for the position of a message about a missing key.
            pub(super) node: &'n Node,
            $(pub(super) $key: Option<&'n Node>,)*
        }

        impl<'n> ClassKeys<'n> {
            pub(super) fn of(node: &'n Node) -> Self {
                ClassKeys { node, $($key: node.get(stringify!($key)),)* }
            }
        }
    };
}

class_keys!(
    class,
    protocol,
    count,
    arrival,
    ramp,
    pacing,
    iterations,
    think,
    connection,
    tls_resumption,
    client_timeout,
    auth,
    cleanup,
    mix,
    ops,
    behaviours,
    session,
    params,
    user_agent,
    prefill,
);
