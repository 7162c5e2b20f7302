//! What the embedded server is told at start and both its sides (HTTP and the STOMP
//! broker) go by: where its services live, the admin account, whether anyone may log in,
//! the largest body it reads.

/// The server's settings, shared by its HTTP side and its broker.
pub(crate) struct Settings {
    /// Context prefix, e.g. `/cosmo`, without a trailing slash.
    pub context: String,
    /// The admin account (CMP), for both sides.
    pub admin_user: String,
    pub admin_password: String,
    /// Accept any credentials and skip ownership checks.
    pub no_auth: bool,
    /// Largest request body read; larger ones get 413.
    pub max_body: usize,
}
