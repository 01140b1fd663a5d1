//! Every control-plane operation, keyed by the `operationId` of `api-spec/openapi.yaml`.
//!
//! Each API method sends through one of these constants, so the method, the path template and the
//! operation id live in one place; the contract tests compare this table with the spec and the
//! emulator, and `api-spec/COVERAGE.md` is generated from it.

use http::Method;

/// One operation of the control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `operationId` in the spec.
    pub operation_id: &'static str,
    /// HTTP method.
    pub method: Method,
    /// Path template, parameters in braces.
    pub path: &'static str,
    /// Whether the route needs a credential.
    pub auth: bool,
    /// The client method that implements it (`Type::method`).
    pub client_method: &'static str,
}

impl Endpoint {
    /// `METHOD /path/{template}`, used in errors and logs (no ids, no query).
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// May be sent twice without changing the outcome: GET, HEAD, PUT and DELETE, and the POSTs
    /// that set a state rather than add to it (closing stdin again is a no-op; a resize to the
    /// same size changes nothing).
    pub fn idempotent(&self) -> bool {
        matches!(self.method, Method::GET | Method::HEAD | Method::PUT | Method::DELETE)
            || IDEMPOTENT_POSTS.contains(&self.operation_id)
    }
}

/// POST operations that are idempotent by nature.
const IDEMPOTENT_POSTS: [&str; 2] = ["closeProcessStdin", "resizeProcess"];

/// E1: `GET /healthz`
pub const HEALTHZ: Endpoint = Endpoint {
    operation_id: "healthz",
    method: Method::GET,
    path: "/healthz",
    auth: false,
    client_method: "Client::healthz",
};

/// E2: `GET /readyz`
pub const READYZ: Endpoint = Endpoint {
    operation_id: "readyz",
    method: Method::GET,
    path: "/readyz",
    auth: false,
    client_method: "Client::readyz",
};

/// E3: `GET /v1/whoami`
pub const WHOAMI: Endpoint = Endpoint {
    operation_id: "whoami",
    method: Method::GET,
    path: "/v1/whoami",
    auth: true,
    client_method: "Client::whoami",
};

/// E4: `GET /v1/shapes`
pub const LIST_SHAPES: Endpoint = Endpoint {
    operation_id: "listShapes",
    method: Method::GET,
    path: "/v1/shapes",
    auth: false,
    client_method: "Client::list_shapes",
};

/// E5: `GET /v1/rootfs`
pub const LIST_ROOTFS: Endpoint = Endpoint {
    operation_id: "listRootfs",
    method: Method::GET,
    path: "/v1/rootfs",
    auth: false,
    client_method: "Client::rootfs",
};

/// E6: `GET /v1/hosts`
pub const LIST_HOSTS: Endpoint = Endpoint {
    operation_id: "listHosts",
    method: Method::GET,
    path: "/v1/hosts",
    auth: true,
    client_method: "Client::list_hosts",
};

/// E7: `POST /v1/sandboxes`
pub const CREATE_SANDBOX: Endpoint = Endpoint {
    operation_id: "createSandbox",
    method: Method::POST,
    path: "/v1/sandboxes",
    auth: true,
    client_method: "Client::create_sandbox",
};

/// E8: `GET /v1/sandboxes`
pub const LIST_SANDBOXES: Endpoint = Endpoint {
    operation_id: "listSandboxes",
    method: Method::GET,
    path: "/v1/sandboxes",
    auth: true,
    client_method: "Client::list_sandboxes",
};

/// E9: `GET /v1/sandboxes/{id}`
pub const GET_SANDBOX: Endpoint = Endpoint {
    operation_id: "getSandbox",
    method: Method::GET,
    path: "/v1/sandboxes/{id}",
    auth: true,
    client_method: "Client::get_sandbox",
};

/// E10: `GET /v1/sandboxes/by-ip/{ip}`
pub const GET_SANDBOX_BY_IP: Endpoint = Endpoint {
    operation_id: "getSandboxByIp",
    method: Method::GET,
    path: "/v1/sandboxes/by-ip/{ip}",
    auth: true,
    client_method: "Client::get_sandbox_by_ip",
};

/// E11: `PATCH /v1/sandboxes/{id}`
pub const UPDATE_SANDBOX: Endpoint = Endpoint {
    operation_id: "updateSandbox",
    method: Method::PATCH,
    path: "/v1/sandboxes/{id}",
    auth: true,
    client_method: "Sandbox::update",
};

/// E12: `DELETE /v1/sandboxes/{id}`
pub const DESTROY_SANDBOX: Endpoint = Endpoint {
    operation_id: "destroySandbox",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}",
    auth: true,
    client_method: "Sandbox::destroy",
};

/// E13: `POST /v1/sandboxes/{id}/pause`
pub const PAUSE_SANDBOX: Endpoint = Endpoint {
    operation_id: "pauseSandbox",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/pause",
    auth: true,
    client_method: "Sandbox::pause",
};

/// E14: `POST /v1/sandboxes/{id}/resume`
pub const RESUME_SANDBOX: Endpoint = Endpoint {
    operation_id: "resumeSandbox",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/resume",
    auth: true,
    client_method: "Sandbox::resume",
};

/// E15: `POST /v1/sandboxes/{id}/fork`
pub const FORK_SANDBOX: Endpoint = Endpoint {
    operation_id: "forkSandbox",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/fork",
    auth: true,
    client_method: "Sandbox::fork",
};

/// E16: `POST /v1/sandboxes/{id}/resize`
pub const RESIZE_SANDBOX: Endpoint = Endpoint {
    operation_id: "resizeSandbox",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/resize",
    auth: true,
    client_method: "Sandbox::resize_disk",
};

/// E17: `POST /v1/sandboxes/{id}/ssh-pubkeys`
pub const ADD_SSH_PUBKEYS: Endpoint = Endpoint {
    operation_id: "addSshPubkeys",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/ssh-pubkeys",
    auth: true,
    client_method: "Sandbox::add_ssh_pubkeys",
};

/// E18: `POST /v1/sandboxes/{id}/exec`
pub const EXEC: Endpoint = Endpoint {
    operation_id: "exec",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/exec",
    auth: true,
    client_method: "Sandbox::exec",
};

/// E19: `PUT /v1/sandboxes/{id}/files`
pub const UPLOAD_FILE: Endpoint = Endpoint {
    operation_id: "uploadFile",
    method: Method::PUT,
    path: "/v1/sandboxes/{id}/files",
    auth: true,
    client_method: "Sandbox::upload",
};

/// E20: `GET /v1/sandboxes/{id}/files`
pub const DOWNLOAD_FILE: Endpoint = Endpoint {
    operation_id: "downloadFile",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/files",
    auth: true,
    client_method: "Sandbox::download",
};

/// E21: `POST /v1/sandboxes/{id}/processes`
pub const CREATE_PROCESS: Endpoint = Endpoint {
    operation_id: "createProcess",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/processes",
    auth: true,
    client_method: "Processes::start",
};

/// E22: `GET /v1/sandboxes/{id}/processes`
pub const LIST_PROCESSES: Endpoint = Endpoint {
    operation_id: "listProcesses",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/processes",
    auth: true,
    client_method: "Processes::list",
};

/// E23: `GET /v1/sandboxes/{id}/processes/{process_id}`
pub const GET_PROCESS: Endpoint = Endpoint {
    operation_id: "getProcess",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/processes/{process_id}",
    auth: true,
    client_method: "Process::info",
};

/// E24: `DELETE /v1/sandboxes/{id}/processes/{process_id}`
pub const STOP_PROCESS: Endpoint = Endpoint {
    operation_id: "stopProcess",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}/processes/{process_id}",
    auth: true,
    client_method: "Process::stop",
};

/// E25: `GET /v1/sandboxes/{id}/processes/{process_id}/connect`
pub const CONNECT_PROCESS: Endpoint = Endpoint {
    operation_id: "connectProcess",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/processes/{process_id}/connect",
    auth: true,
    client_method: "Process::connect",
};

/// E26: `POST /v1/sandboxes/{id}/processes/{process_id}/input`
pub const WRITE_PROCESS_INPUT: Endpoint = Endpoint {
    operation_id: "writeProcessInput",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/processes/{process_id}/input",
    auth: true,
    client_method: "Process::write_input",
};

/// E27: `POST /v1/sandboxes/{id}/processes/{process_id}/stdin/close`
pub const CLOSE_PROCESS_STDIN: Endpoint = Endpoint {
    operation_id: "closeProcessStdin",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/processes/{process_id}/stdin/close",
    auth: true,
    client_method: "Process::close_stdin",
};

/// E28: `POST /v1/sandboxes/{id}/processes/{process_id}/resize`
pub const RESIZE_PROCESS: Endpoint = Endpoint {
    operation_id: "resizeProcess",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/processes/{process_id}/resize",
    auth: true,
    client_method: "Process::resize",
};

/// E29: `POST /v1/sandboxes/{id}/processes/{process_id}/signal`
pub const SIGNAL_PROCESS: Endpoint = Endpoint {
    operation_id: "signalProcess",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/processes/{process_id}/signal",
    auth: true,
    client_method: "Process::signal",
};

/// E30: `GET /v1/sandboxes/{id}/processes/{process_id}/wait`
pub const WAIT_PROCESS: Endpoint = Endpoint {
    operation_id: "waitProcess",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/processes/{process_id}/wait",
    auth: true,
    client_method: "Process::wait",
};

/// E31: `POST /v1/sandboxes/{id}/shell`
pub const OPEN_SHELL: Endpoint = Endpoint {
    operation_id: "openShell",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/shell",
    auth: true,
    client_method: "Sandbox::shell",
};

/// E32: `GET /v1/sandboxes/{id}/shell-ws`
pub const OPEN_SHELL_WEB_SOCKET: Endpoint = Endpoint {
    operation_id: "openShellWebSocket",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/shell-ws",
    auth: true,
    client_method: "Sandbox::shell_ws",
};

/// E33: `POST /v1/sandboxes/{id}/tunnel/{port}`
pub const OPEN_TUNNEL: Endpoint = Endpoint {
    operation_id: "openTunnel",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/tunnel/{port}",
    auth: true,
    client_method: "Sandbox::tunnel",
};

/// E34: `GET /v1/sandboxes/{id}/egress`
pub const GET_EGRESS: Endpoint = Endpoint {
    operation_id: "getEgress",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/egress",
    auth: true,
    client_method: "Sandbox::egress",
};

/// E35: `PUT /v1/sandboxes/{id}/egress`
pub const SET_EGRESS: Endpoint = Endpoint {
    operation_id: "setEgress",
    method: Method::PUT,
    path: "/v1/sandboxes/{id}/egress",
    auth: true,
    client_method: "Sandbox::set_egress",
};

/// E36: `GET /v1/sandboxes/{id}/bandwidth`
pub const GET_BANDWIDTH: Endpoint = Endpoint {
    operation_id: "getBandwidth",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/bandwidth",
    auth: true,
    client_method: "Sandbox::bandwidth",
};

/// E37: `POST /v1/sandboxes/{id}/bandwidth/recharge`
pub const RECHARGE_BANDWIDTH: Endpoint = Endpoint {
    operation_id: "rechargeBandwidth",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/bandwidth/recharge",
    auth: true,
    client_method: "Sandbox::recharge_bandwidth",
};

/// E38: `GET /v1/networks`
pub const LIST_NETWORKS: Endpoint = Endpoint {
    operation_id: "listNetworks",
    method: Method::GET,
    path: "/v1/networks",
    auth: true,
    client_method: "Client::list_networks",
};

/// E39: `POST /v1/networks`
pub const CREATE_NETWORK: Endpoint = Endpoint {
    operation_id: "createNetwork",
    method: Method::POST,
    path: "/v1/networks",
    auth: true,
    client_method: "Client::create_network",
};

/// E40: `GET /v1/networks/{network}`
pub const GET_NETWORK: Endpoint = Endpoint {
    operation_id: "getNetwork",
    method: Method::GET,
    path: "/v1/networks/{network}",
    auth: true,
    client_method: "Client::get_network",
};

/// E41: `DELETE /v1/networks/{network}`
pub const DELETE_NETWORK: Endpoint = Endpoint {
    operation_id: "deleteNetwork",
    method: Method::DELETE,
    path: "/v1/networks/{network}",
    auth: true,
    client_method: "Client::delete_network",
};

/// E42: `POST /v1/sandboxes/{id}/networks`
pub const ATTACH_NETWORK: Endpoint = Endpoint {
    operation_id: "attachNetwork",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/networks",
    auth: true,
    client_method: "Sandbox::attach_network",
};

/// E43: `DELETE /v1/sandboxes/{id}/networks/{network}`
pub const DETACH_NETWORK: Endpoint = Endpoint {
    operation_id: "detachNetwork",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}/networks/{network}",
    auth: true,
    client_method: "Sandbox::detach_network",
};

/// E44: `GET /v1/disks`
pub const LIST_DISKS: Endpoint = Endpoint {
    operation_id: "listDisks",
    method: Method::GET,
    path: "/v1/disks",
    auth: true,
    client_method: "Client::list_disks",
};

/// E45: `POST /v1/disks`
pub const CREATE_DISK: Endpoint = Endpoint {
    operation_id: "createDisk",
    method: Method::POST,
    path: "/v1/disks",
    auth: true,
    client_method: "Client::create_disk",
};

/// E46: `GET /v1/disks/{disk}`
pub const GET_DISK: Endpoint = Endpoint {
    operation_id: "getDisk",
    method: Method::GET,
    path: "/v1/disks/{disk}",
    auth: true,
    client_method: "Client::get_disk",
};

/// E47: `PATCH /v1/disks/{disk}`
pub const UPDATE_DISK_CREDENTIALS: Endpoint = Endpoint {
    operation_id: "updateDiskCredentials",
    method: Method::PATCH,
    path: "/v1/disks/{disk}",
    auth: true,
    client_method: "Client::update_disk_credentials",
};

/// E48: `DELETE /v1/disks/{disk}`
pub const DELETE_DISK: Endpoint = Endpoint {
    operation_id: "deleteDisk",
    method: Method::DELETE,
    path: "/v1/disks/{disk}",
    auth: true,
    client_method: "Client::delete_disk",
};

/// E49: `GET /v1/sandboxes/{id}/disks`
pub const LIST_SANDBOX_DISKS: Endpoint = Endpoint {
    operation_id: "listSandboxDisks",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/disks",
    auth: true,
    client_method: "Sandbox::list_disks",
};

/// E50: `POST /v1/sandboxes/{id}/disks`
pub const ATTACH_DISK: Endpoint = Endpoint {
    operation_id: "attachDisk",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/disks",
    auth: true,
    client_method: "Sandbox::attach_disk",
};

/// E51: `DELETE /v1/sandboxes/{id}/disks/{disk_id}`
pub const DETACH_DISK: Endpoint = Endpoint {
    operation_id: "detachDisk",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}/disks/{disk_id}",
    auth: true,
    client_method: "Sandbox::detach_disk",
};

/// E52: `GET /v1/templates`
pub const LIST_TEMPLATES: Endpoint = Endpoint {
    operation_id: "listTemplates",
    method: Method::GET,
    path: "/v1/templates",
    auth: true,
    client_method: "Client::list_templates",
};

/// E53: `POST /v1/templates`
pub const CREATE_TEMPLATE: Endpoint = Endpoint {
    operation_id: "createTemplate",
    method: Method::POST,
    path: "/v1/templates",
    auth: true,
    client_method: "Client::create_template",
};

/// E54: `GET /v1/templates/{template}`
pub const GET_TEMPLATE: Endpoint = Endpoint {
    operation_id: "getTemplate",
    method: Method::GET,
    path: "/v1/templates/{template}",
    auth: true,
    client_method: "Client::get_template",
};

/// E55: `DELETE /v1/templates/{template}`
pub const DELETE_TEMPLATE: Endpoint = Endpoint {
    operation_id: "deleteTemplate",
    method: Method::DELETE,
    path: "/v1/templates/{template}",
    auth: true,
    client_method: "Client::delete_template",
};

/// E56: `GET /v1/templates/{template}/logs`
pub const GET_TEMPLATE_LOGS: Endpoint = Endpoint {
    operation_id: "getTemplateLogs",
    method: Method::GET,
    path: "/v1/templates/{template}/logs",
    auth: true,
    client_method: "Client::template_logs",
};

/// E57: `GET /v1/sandboxes/{id}/metrics`
pub const GET_SANDBOX_METRICS: Endpoint = Endpoint {
    operation_id: "getSandboxMetrics",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/metrics",
    auth: true,
    client_method: "Sandbox::metrics",
};

/// E58: `GET /v1/metrics`
pub const GET_USAGE_METRICS: Endpoint = Endpoint {
    operation_id: "getUsageMetrics",
    method: Method::GET,
    path: "/v1/metrics",
    auth: true,
    client_method: "Client::usage_metrics",
};

/// E59: `GET /v1/metrics/timeseries`
pub const GET_USAGE_TIMESERIES: Endpoint = Endpoint {
    operation_id: "getUsageTimeseries",
    method: Method::GET,
    path: "/v1/metrics/timeseries",
    auth: true,
    client_method: "Client::usage_timeseries",
};

/// E60: `POST /v1/sandboxes/{id}/access-token`
pub const CREATE_ACCESS_TOKEN: Endpoint = Endpoint {
    operation_id: "createAccessToken",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/access-token",
    auth: true,
    client_method: "Sandbox::create_access_token",
};

/// E61: `GET /v1/sandboxes/{id}/access-token`
pub const GET_ACCESS_TOKEN: Endpoint = Endpoint {
    operation_id: "getAccessToken",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/access-token",
    auth: true,
    client_method: "Sandbox::access_token",
};

/// E62: `POST /v1/sandboxes/{id}/access-token/rotate`
pub const ROTATE_ACCESS_TOKEN: Endpoint = Endpoint {
    operation_id: "rotateAccessToken",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/access-token/rotate",
    auth: true,
    client_method: "Sandbox::rotate_access_token",
};

/// E63: `DELETE /v1/sandboxes/{id}/access-token`
pub const REVOKE_ACCESS_TOKEN: Endpoint = Endpoint {
    operation_id: "revokeAccessToken",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}/access-token",
    auth: true,
    client_method: "Sandbox::revoke_access_token",
};

/// E64: `GET /v1/sandboxes/{id}/computer/screen`
pub const GET_COMPUTER_SCREEN_SIZE: Endpoint = Endpoint {
    operation_id: "getComputerScreenSize",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/screen",
    auth: true,
    client_method: "Computer::screen_size",
};

/// E65: `GET /v1/sandboxes/{id}/computer/cursor`
pub const GET_COMPUTER_CURSOR: Endpoint = Endpoint {
    operation_id: "getComputerCursor",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/cursor",
    auth: true,
    client_method: "Computer::cursor",
};

/// E66: `GET /v1/sandboxes/{id}/computer/screenshot`
pub const GET_COMPUTER_SCREENSHOT: Endpoint = Endpoint {
    operation_id: "getComputerScreenshot",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/screenshot",
    auth: true,
    client_method: "Computer::screenshot",
};

/// E67: `GET /v1/sandboxes/{id}/computer/clipboard`
pub const GET_COMPUTER_CLIPBOARD: Endpoint = Endpoint {
    operation_id: "getComputerClipboard",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/clipboard",
    auth: true,
    client_method: "Computer::clipboard",
};

/// E68: `PUT /v1/sandboxes/{id}/computer/clipboard`
pub const SET_COMPUTER_CLIPBOARD: Endpoint = Endpoint {
    operation_id: "setComputerClipboard",
    method: Method::PUT,
    path: "/v1/sandboxes/{id}/computer/clipboard",
    auth: true,
    client_method: "Computer::set_clipboard",
};

/// E69: `POST /v1/sandboxes/{id}/computer/open`
pub const COMPUTER_OPEN: Endpoint = Endpoint {
    operation_id: "computerOpen",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/open",
    auth: true,
    client_method: "Computer::open",
};

/// E70: `POST /v1/sandboxes/{id}/computer/launch`
pub const COMPUTER_LAUNCH: Endpoint = Endpoint {
    operation_id: "computerLaunch",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/launch",
    auth: true,
    client_method: "Computer::launch",
};

/// E71: `POST /v1/sandboxes/{id}/computer/mouse/move`
pub const COMPUTER_MOUSE_MOVE: Endpoint = Endpoint {
    operation_id: "computerMouseMove",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/mouse/move",
    auth: true,
    client_method: "Computer::mouse_move",
};

/// E72: `POST /v1/sandboxes/{id}/computer/mouse/click`
pub const COMPUTER_MOUSE_CLICK: Endpoint = Endpoint {
    operation_id: "computerMouseClick",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/mouse/click",
    auth: true,
    client_method: "Computer::mouse_click",
};

/// E73: `POST /v1/sandboxes/{id}/computer/mouse/scroll`
pub const COMPUTER_MOUSE_SCROLL: Endpoint = Endpoint {
    operation_id: "computerMouseScroll",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/mouse/scroll",
    auth: true,
    client_method: "Computer::mouse_scroll",
};

/// E74: `POST /v1/sandboxes/{id}/computer/mouse/drag`
pub const COMPUTER_MOUSE_DRAG: Endpoint = Endpoint {
    operation_id: "computerMouseDrag",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/mouse/drag",
    auth: true,
    client_method: "Computer::mouse_drag",
};

/// E75: `POST /v1/sandboxes/{id}/computer/mouse/down`
pub const COMPUTER_MOUSE_DOWN: Endpoint = Endpoint {
    operation_id: "computerMouseDown",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/mouse/down",
    auth: true,
    client_method: "Computer::mouse_down",
};

/// E76: `POST /v1/sandboxes/{id}/computer/mouse/up`
pub const COMPUTER_MOUSE_UP: Endpoint = Endpoint {
    operation_id: "computerMouseUp",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/mouse/up",
    auth: true,
    client_method: "Computer::mouse_up",
};

/// E77: `POST /v1/sandboxes/{id}/computer/keyboard/type`
pub const COMPUTER_KEYBOARD_TYPE: Endpoint = Endpoint {
    operation_id: "computerKeyboardType",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/keyboard/type",
    auth: true,
    client_method: "Computer::type_text",
};

/// E78: `POST /v1/sandboxes/{id}/computer/keyboard/press`
pub const COMPUTER_KEYBOARD_PRESS: Endpoint = Endpoint {
    operation_id: "computerKeyboardPress",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/keyboard/press",
    auth: true,
    client_method: "Computer::press_keys",
};

/// E79: `POST /v1/sandboxes/{id}/computer/keyboard/down`
pub const COMPUTER_KEYBOARD_DOWN: Endpoint = Endpoint {
    operation_id: "computerKeyboardDown",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/keyboard/down",
    auth: true,
    client_method: "Computer::keys_down",
};

/// E80: `POST /v1/sandboxes/{id}/computer/keyboard/up`
pub const COMPUTER_KEYBOARD_UP: Endpoint = Endpoint {
    operation_id: "computerKeyboardUp",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/keyboard/up",
    auth: true,
    client_method: "Computer::keys_up",
};

/// E81: `GET /v1/sandboxes/{id}/computer/windows`
pub const LIST_COMPUTER_WINDOWS: Endpoint = Endpoint {
    operation_id: "listComputerWindows",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/windows",
    auth: true,
    client_method: "Computer::windows",
};

/// E82: `GET /v1/sandboxes/{id}/computer/windows/current`
pub const GET_COMPUTER_CURRENT_WINDOW: Endpoint = Endpoint {
    operation_id: "getComputerCurrentWindow",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/windows/current",
    auth: true,
    client_method: "Computer::current_window",
};

/// E83: `GET /v1/sandboxes/{id}/computer/windows/{window_id}`
pub const GET_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "getComputerWindow",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}",
    auth: true,
    client_method: "Computer::window",
};

/// E84: `GET /v1/sandboxes/{id}/computer/windows/{window_id}/geometry`
pub const GET_COMPUTER_WINDOW_GEOMETRY: Endpoint = Endpoint {
    operation_id: "getComputerWindowGeometry",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/geometry",
    auth: true,
    client_method: "Computer::window_geometry",
};

/// E85: `POST /v1/sandboxes/{id}/computer/windows/{window_id}/focus`
pub const FOCUS_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "focusComputerWindow",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/focus",
    auth: true,
    client_method: "Computer::focus_window",
};

/// E86: `POST /v1/sandboxes/{id}/computer/windows/{window_id}/move`
pub const MOVE_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "moveComputerWindow",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/move",
    auth: true,
    client_method: "Computer::move_window",
};

/// E87: `POST /v1/sandboxes/{id}/computer/windows/{window_id}/resize`
pub const RESIZE_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "resizeComputerWindow",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/resize",
    auth: true,
    client_method: "Computer::resize_window",
};

/// E88: `POST /v1/sandboxes/{id}/computer/windows/{window_id}/maximize`
pub const MAXIMIZE_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "maximizeComputerWindow",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/maximize",
    auth: true,
    client_method: "Computer::maximize_window",
};

/// E89: `POST /v1/sandboxes/{id}/computer/windows/{window_id}/minimize`
pub const MINIMIZE_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "minimizeComputerWindow",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/minimize",
    auth: true,
    client_method: "Computer::minimize_window",
};

/// E90: `POST /v1/sandboxes/{id}/computer/windows/{window_id}/restore`
pub const RESTORE_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "restoreComputerWindow",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}/restore",
    auth: true,
    client_method: "Computer::restore_window",
};

/// E91: `DELETE /v1/sandboxes/{id}/computer/windows/{window_id}`
pub const CLOSE_COMPUTER_WINDOW: Endpoint = Endpoint {
    operation_id: "closeComputerWindow",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}/computer/windows/{window_id}",
    auth: true,
    client_method: "Computer::close_window",
};

/// E92: `GET /v1/sandboxes/{id}/computer/screens`
pub const LIST_COMPUTER_SCREENS: Endpoint = Endpoint {
    operation_id: "listComputerScreens",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/screens",
    auth: true,
    client_method: "Computer::screens",
};

/// E93: `POST /v1/sandboxes/{id}/computer/screens`
pub const CREATE_COMPUTER_SCREEN: Endpoint = Endpoint {
    operation_id: "createComputerScreen",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/screens",
    auth: true,
    client_method: "Computer::create_screen",
};

/// E94: `GET /v1/sandboxes/{id}/computer/screens/{screen_id}`
pub const GET_COMPUTER_SCREEN: Endpoint = Endpoint {
    operation_id: "getComputerScreen",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/screens/{screen_id}",
    auth: true,
    client_method: "Computer::screen",
};

/// E95: `DELETE /v1/sandboxes/{id}/computer/screens/{screen_id}`
pub const DELETE_COMPUTER_SCREEN: Endpoint = Endpoint {
    operation_id: "deleteComputerScreen",
    method: Method::DELETE,
    path: "/v1/sandboxes/{id}/computer/screens/{screen_id}",
    auth: true,
    client_method: "Computer::delete_screen",
};

/// E96: `POST /v1/sandboxes/{id}/computer/screens/{screen_id}/resize`
pub const RESIZE_COMPUTER_SCREEN: Endpoint = Endpoint {
    operation_id: "resizeComputerScreen",
    method: Method::POST,
    path: "/v1/sandboxes/{id}/computer/screens/{screen_id}/resize",
    auth: true,
    client_method: "Computer::resize_screen",
};

/// E97: `GET /v1/sandboxes/{id}/computer/screens/{screen_id}/connect`
pub const CONNECT_COMPUTER_SCREEN: Endpoint = Endpoint {
    operation_id: "connectComputerScreen",
    method: Method::GET,
    path: "/v1/sandboxes/{id}/computer/screens/{screen_id}/connect",
    auth: true,
    client_method: "Computer::connect_screen",
};

/// E98: `POST /v1/devices`
pub const REGISTER_DEVICE: Endpoint = Endpoint {
    operation_id: "registerDevice",
    method: Method::POST,
    path: "/v1/devices",
    auth: true,
    client_method: "Client::register_device",
};

/// E99: `GET /v1/devices`
pub const LIST_DEVICES: Endpoint = Endpoint {
    operation_id: "listDevices",
    method: Method::GET,
    path: "/v1/devices",
    auth: true,
    client_method: "Client::list_devices",
};

/// E100: `GET /v1/devices/{device_id}`
pub const GET_DEVICE: Endpoint = Endpoint {
    operation_id: "getDevice",
    method: Method::GET,
    path: "/v1/devices/{device_id}",
    auth: true,
    client_method: "Client::get_device",
};

/// E101: `DELETE /v1/devices/{device_id}`
pub const REVOKE_DEVICE: Endpoint = Endpoint {
    operation_id: "revokeDevice",
    method: Method::DELETE,
    path: "/v1/devices/{device_id}",
    auth: true,
    client_method: "Client::revoke_device",
};

/// E102: `POST /v1/devices/{device_id}/networks`
pub const ATTACH_DEVICE_NETWORK: Endpoint = Endpoint {
    operation_id: "attachDeviceNetwork",
    method: Method::POST,
    path: "/v1/devices/{device_id}/networks",
    auth: true,
    client_method: "Client::attach_device_network",
};

/// E103: `GET /v1/devices/{device_id}/networks`
pub const LIST_DEVICE_NETWORKS: Endpoint = Endpoint {
    operation_id: "listDeviceNetworks",
    method: Method::GET,
    path: "/v1/devices/{device_id}/networks",
    auth: true,
    client_method: "Client::list_device_networks",
};

/// E104: `DELETE /v1/devices/{device_id}/networks/{network}`
pub const DETACH_DEVICE_NETWORK: Endpoint = Endpoint {
    operation_id: "detachDeviceNetwork",
    method: Method::DELETE,
    path: "/v1/devices/{device_id}/networks/{network}",
    auth: true,
    client_method: "Client::detach_device_network",
};

/// E105: `POST /v1/devices/{device_id}/sessions`
pub const OPEN_DEVICE_SESSION: Endpoint = Endpoint {
    operation_id: "openDeviceSession",
    method: Method::POST,
    path: "/v1/devices/{device_id}/sessions",
    auth: true,
    client_method: "Client::open_device_session",
};

/// E106: `PUT /v1/devices/{device_id}/sessions/{session_id}`
pub const RENEW_DEVICE_SESSION: Endpoint = Endpoint {
    operation_id: "renewDeviceSession",
    method: Method::PUT,
    path: "/v1/devices/{device_id}/sessions/{session_id}",
    auth: true,
    client_method: "Client::renew_device_session",
};

/// E107: `DELETE /v1/devices/{device_id}/sessions/{session_id}`
pub const CLOSE_DEVICE_SESSION: Endpoint = Endpoint {
    operation_id: "closeDeviceSession",
    method: Method::DELETE,
    path: "/v1/devices/{device_id}/sessions/{session_id}",
    auth: true,
    client_method: "Client::close_device_session",
};

/// All operations, in the reference's order (E1–E107).
pub const ALL: &[Endpoint] = &[
    HEALTHZ,
    READYZ,
    WHOAMI,
    LIST_SHAPES,
    LIST_ROOTFS,
    LIST_HOSTS,
    CREATE_SANDBOX,
    LIST_SANDBOXES,
    GET_SANDBOX,
    GET_SANDBOX_BY_IP,
    UPDATE_SANDBOX,
    DESTROY_SANDBOX,
    PAUSE_SANDBOX,
    RESUME_SANDBOX,
    FORK_SANDBOX,
    RESIZE_SANDBOX,
    ADD_SSH_PUBKEYS,
    EXEC,
    UPLOAD_FILE,
    DOWNLOAD_FILE,
    CREATE_PROCESS,
    LIST_PROCESSES,
    GET_PROCESS,
    STOP_PROCESS,
    CONNECT_PROCESS,
    WRITE_PROCESS_INPUT,
    CLOSE_PROCESS_STDIN,
    RESIZE_PROCESS,
    SIGNAL_PROCESS,
    WAIT_PROCESS,
    OPEN_SHELL,
    OPEN_SHELL_WEB_SOCKET,
    OPEN_TUNNEL,
    GET_EGRESS,
    SET_EGRESS,
    GET_BANDWIDTH,
    RECHARGE_BANDWIDTH,
    LIST_NETWORKS,
    CREATE_NETWORK,
    GET_NETWORK,
    DELETE_NETWORK,
    ATTACH_NETWORK,
    DETACH_NETWORK,
    LIST_DISKS,
    CREATE_DISK,
    GET_DISK,
    UPDATE_DISK_CREDENTIALS,
    DELETE_DISK,
    LIST_SANDBOX_DISKS,
    ATTACH_DISK,
    DETACH_DISK,
    LIST_TEMPLATES,
    CREATE_TEMPLATE,
    GET_TEMPLATE,
    DELETE_TEMPLATE,
    GET_TEMPLATE_LOGS,
    GET_SANDBOX_METRICS,
    GET_USAGE_METRICS,
    GET_USAGE_TIMESERIES,
    CREATE_ACCESS_TOKEN,
    GET_ACCESS_TOKEN,
    ROTATE_ACCESS_TOKEN,
    REVOKE_ACCESS_TOKEN,
    GET_COMPUTER_SCREEN_SIZE,
    GET_COMPUTER_CURSOR,
    GET_COMPUTER_SCREENSHOT,
    GET_COMPUTER_CLIPBOARD,
    SET_COMPUTER_CLIPBOARD,
    COMPUTER_OPEN,
    COMPUTER_LAUNCH,
    COMPUTER_MOUSE_MOVE,
    COMPUTER_MOUSE_CLICK,
    COMPUTER_MOUSE_SCROLL,
    COMPUTER_MOUSE_DRAG,
    COMPUTER_MOUSE_DOWN,
    COMPUTER_MOUSE_UP,
    COMPUTER_KEYBOARD_TYPE,
    COMPUTER_KEYBOARD_PRESS,
    COMPUTER_KEYBOARD_DOWN,
    COMPUTER_KEYBOARD_UP,
    LIST_COMPUTER_WINDOWS,
    GET_COMPUTER_CURRENT_WINDOW,
    GET_COMPUTER_WINDOW,
    GET_COMPUTER_WINDOW_GEOMETRY,
    FOCUS_COMPUTER_WINDOW,
    MOVE_COMPUTER_WINDOW,
    RESIZE_COMPUTER_WINDOW,
    MAXIMIZE_COMPUTER_WINDOW,
    MINIMIZE_COMPUTER_WINDOW,
    RESTORE_COMPUTER_WINDOW,
    CLOSE_COMPUTER_WINDOW,
    LIST_COMPUTER_SCREENS,
    CREATE_COMPUTER_SCREEN,
    GET_COMPUTER_SCREEN,
    DELETE_COMPUTER_SCREEN,
    RESIZE_COMPUTER_SCREEN,
    CONNECT_COMPUTER_SCREEN,
    REGISTER_DEVICE,
    LIST_DEVICES,
    GET_DEVICE,
    REVOKE_DEVICE,
    ATTACH_DEVICE_NETWORK,
    LIST_DEVICE_NETWORKS,
    DETACH_DEVICE_NETWORK,
    OPEN_DEVICE_SESSION,
    RENEW_DEVICE_SESSION,
    CLOSE_DEVICE_SESSION,
];
