//! Generic HTTP: the workload defines its operations (method, path, headers, body,
//! expected statuses, captures, pools), so its schema is empty; the requests are resolved
//! in `workload/resolve/http.rs` and driven by `protocol/http.rs`.

use super::ProtocolDef;

pub(super) static DEF: ProtocolDef = ProtocolDef {
    ops: &[],
    class_params: &[],
};
