//! Every control-plane operation, keyed by the `operationId` of `api-spec/openapi.yaml`: one
//! line each in the table at the end, which also makes [`ALL`].
//!
//! Each API method sends through one of these constants, so the method, the path template and the
//! operation id live in one place; the contract tests compare this table with the spec and the
//! emulator, and `api-spec/COVERAGE.md` is generated from it. The transport (retries, errors)
//! reads the table; the resource modules in `api/` name their operation from it.

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
        matches!(
            self.method,
            Method::GET | Method::HEAD | Method::PUT | Method::DELETE
        ) || IDEMPOTENT_POSTS.contains(&self.operation_id)
    }
}

/// POST operations that are idempotent by nature.
const IDEMPOTENT_POSTS: [&str; 2] = ["closeProcessStdin", "resizeProcess"];

/// Declares each operation as a constant and [`ALL`] as the list of them, from one line per
/// operation: `NAME: METHOD "path", operationId, auth|public, Type::method;`.
macro_rules! endpoints {
    ($($name:ident: $method:ident $path:literal, $op:ident, $auth:ident, $ty:ident::$fun:ident;)*) => {
        $(
            #[doc = concat!("`", stringify!($method), " ", $path, "` (`", stringify!($op), "`)")]
            pub const $name: Endpoint = Endpoint {
                operation_id: stringify!($op),
                method: Method::$method,
                path: $path,
                auth: endpoints!(@auth $auth),
                client_method: concat!(stringify!($ty), "::", stringify!($fun)),
            };
        )*
        /// Every operation, in the spec's order.
        pub const ALL: &[Endpoint] = &[$($name),*];
    };
    (@auth auth) => { true };
    (@auth public) => { false };
}

endpoints! {
    HEALTHZ:                       GET    "/healthz",                                                 healthz,                   public, Client::healthz;
    READYZ:                        GET    "/readyz",                                                  readyz,                    public, Client::readyz;
    WHOAMI:                        GET    "/v1/whoami",                                               whoami,                    auth, Client::whoami;
    LIST_SHAPES:                   GET    "/v1/shapes",                                               listShapes,                public, Client::list_shapes;
    LIST_ROOTFS:                   GET    "/v1/rootfs",                                               listRootfs,                public, Client::rootfs;
    LIST_HOSTS:                    GET    "/v1/hosts",                                                listHosts,                 auth, Client::list_hosts;
    CREATE_SANDBOX:                POST   "/v1/sandboxes",                                            createSandbox,             auth, Client::create_sandbox;
    LIST_SANDBOXES:                GET    "/v1/sandboxes",                                            listSandboxes,             auth, Client::list_sandboxes;
    GET_SANDBOX:                   GET    "/v1/sandboxes/{id}",                                       getSandbox,                auth, Client::get_sandbox;
    GET_SANDBOX_BY_IP:             GET    "/v1/sandboxes/by-ip/{ip}",                                 getSandboxByIp,            auth, Client::get_sandbox_by_ip;
    UPDATE_SANDBOX:                PATCH  "/v1/sandboxes/{id}",                                       updateSandbox,             auth, Sandbox::update;
    DESTROY_SANDBOX:               DELETE "/v1/sandboxes/{id}",                                       destroySandbox,            auth, Sandbox::destroy;
    PAUSE_SANDBOX:                 POST   "/v1/sandboxes/{id}/pause",                                 pauseSandbox,              auth, Sandbox::pause;
    RESUME_SANDBOX:                POST   "/v1/sandboxes/{id}/resume",                                resumeSandbox,             auth, Sandbox::resume;
    FORK_SANDBOX:                  POST   "/v1/sandboxes/{id}/fork",                                  forkSandbox,               auth, Sandbox::fork;
    RESIZE_SANDBOX:                POST   "/v1/sandboxes/{id}/resize",                                resizeSandbox,             auth, Sandbox::resize_disk;
    ADD_SSH_PUBKEYS:               POST   "/v1/sandboxes/{id}/ssh-pubkeys",                           addSshPubkeys,             auth, Sandbox::add_ssh_pubkeys;
    EXEC:                          POST   "/v1/sandboxes/{id}/exec",                                  exec,                      auth, Sandbox::exec;
    UPLOAD_FILE:                   PUT    "/v1/sandboxes/{id}/files",                                 uploadFile,                auth, Sandbox::upload;
    DOWNLOAD_FILE:                 GET    "/v1/sandboxes/{id}/files",                                 downloadFile,              auth, Sandbox::download;
    CREATE_PROCESS:                POST   "/v1/sandboxes/{id}/processes",                             createProcess,             auth, Processes::start;
    LIST_PROCESSES:                GET    "/v1/sandboxes/{id}/processes",                             listProcesses,             auth, Processes::list;
    GET_PROCESS:                   GET    "/v1/sandboxes/{id}/processes/{process_id}",                getProcess,                auth, Process::info;
    STOP_PROCESS:                  DELETE "/v1/sandboxes/{id}/processes/{process_id}",                stopProcess,               auth, Process::stop;
    CONNECT_PROCESS:               GET    "/v1/sandboxes/{id}/processes/{process_id}/connect",        connectProcess,            auth, Process::connect;
    WRITE_PROCESS_INPUT:           POST   "/v1/sandboxes/{id}/processes/{process_id}/input",          writeProcessInput,         auth, Process::write_input;
    CLOSE_PROCESS_STDIN:           POST   "/v1/sandboxes/{id}/processes/{process_id}/stdin/close",    closeProcessStdin,         auth, Process::close_stdin;
    RESIZE_PROCESS:                POST   "/v1/sandboxes/{id}/processes/{process_id}/resize",         resizeProcess,             auth, Process::resize;
    SIGNAL_PROCESS:                POST   "/v1/sandboxes/{id}/processes/{process_id}/signal",         signalProcess,             auth, Process::signal;
    WAIT_PROCESS:                  GET    "/v1/sandboxes/{id}/processes/{process_id}/wait",           waitProcess,               auth, Process::wait;
    OPEN_SHELL:                    POST   "/v1/sandboxes/{id}/shell",                                 openShell,                 auth, Sandbox::shell;
    OPEN_SHELL_WEB_SOCKET:         GET    "/v1/sandboxes/{id}/shell-ws",                              openShellWebSocket,        auth, Sandbox::shell_ws;
    OPEN_TUNNEL:                   POST   "/v1/sandboxes/{id}/tunnel/{port}",                         openTunnel,                auth, Sandbox::tunnel;
    GET_EGRESS:                    GET    "/v1/sandboxes/{id}/egress",                                getEgress,                 auth, Sandbox::egress;
    SET_EGRESS:                    PUT    "/v1/sandboxes/{id}/egress",                                setEgress,                 auth, Sandbox::set_egress;
    GET_BANDWIDTH:                 GET    "/v1/sandboxes/{id}/bandwidth",                             getBandwidth,              auth, Sandbox::bandwidth;
    RECHARGE_BANDWIDTH:            POST   "/v1/sandboxes/{id}/bandwidth/recharge",                    rechargeBandwidth,         auth, Sandbox::recharge_bandwidth;
    LIST_NETWORKS:                 GET    "/v1/networks",                                             listNetworks,              auth, Client::list_networks;
    CREATE_NETWORK:                POST   "/v1/networks",                                             createNetwork,             auth, Client::create_network;
    GET_NETWORK:                   GET    "/v1/networks/{network}",                                   getNetwork,                auth, Client::get_network;
    DELETE_NETWORK:                DELETE "/v1/networks/{network}",                                   deleteNetwork,             auth, Client::delete_network;
    ATTACH_NETWORK:                POST   "/v1/sandboxes/{id}/networks",                              attachNetwork,             auth, Sandbox::attach_network;
    DETACH_NETWORK:                DELETE "/v1/sandboxes/{id}/networks/{network}",                    detachNetwork,             auth, Sandbox::detach_network;
    LIST_DISKS:                    GET    "/v1/disks",                                                listDisks,                 auth, Client::list_disks;
    CREATE_DISK:                   POST   "/v1/disks",                                                createDisk,                auth, Client::create_disk;
    GET_DISK:                      GET    "/v1/disks/{disk}",                                         getDisk,                   auth, Client::get_disk;
    UPDATE_DISK_CREDENTIALS:       PATCH  "/v1/disks/{disk}",                                         updateDiskCredentials,     auth, Client::update_disk_credentials;
    DELETE_DISK:                   DELETE "/v1/disks/{disk}",                                         deleteDisk,                auth, Client::delete_disk;
    LIST_SANDBOX_DISKS:            GET    "/v1/sandboxes/{id}/disks",                                 listSandboxDisks,          auth, Sandbox::list_disks;
    ATTACH_DISK:                   POST   "/v1/sandboxes/{id}/disks",                                 attachDisk,                auth, Sandbox::attach_disk;
    DETACH_DISK:                   DELETE "/v1/sandboxes/{id}/disks/{disk_id}",                       detachDisk,                auth, Sandbox::detach_disk;
    LIST_TEMPLATES:                GET    "/v1/templates",                                            listTemplates,             auth, Client::list_templates;
    CREATE_TEMPLATE:               POST   "/v1/templates",                                            createTemplate,            auth, Client::create_template;
    GET_TEMPLATE:                  GET    "/v1/templates/{template}",                                 getTemplate,               auth, Client::get_template;
    DELETE_TEMPLATE:               DELETE "/v1/templates/{template}",                                 deleteTemplate,            auth, Client::delete_template;
    GET_TEMPLATE_LOGS:             GET    "/v1/templates/{template}/logs",                            getTemplateLogs,           auth, Client::template_logs;
    GET_SANDBOX_METRICS:           GET    "/v1/sandboxes/{id}/metrics",                               getSandboxMetrics,         auth, Sandbox::metrics;
    GET_USAGE_METRICS:             GET    "/v1/metrics",                                              getUsageMetrics,           auth, Client::usage_metrics;
    GET_USAGE_TIMESERIES:          GET    "/v1/metrics/timeseries",                                   getUsageTimeseries,        auth, Client::usage_timeseries;
    CREATE_ACCESS_TOKEN:           POST   "/v1/sandboxes/{id}/access-token",                          createAccessToken,         auth, Sandbox::create_access_token;
    GET_ACCESS_TOKEN:              GET    "/v1/sandboxes/{id}/access-token",                          getAccessToken,            auth, Sandbox::access_token;
    ROTATE_ACCESS_TOKEN:           POST   "/v1/sandboxes/{id}/access-token/rotate",                   rotateAccessToken,         auth, Sandbox::rotate_access_token;
    REVOKE_ACCESS_TOKEN:           DELETE "/v1/sandboxes/{id}/access-token",                          revokeAccessToken,         auth, Sandbox::revoke_access_token;
    GET_COMPUTER_SCREEN_SIZE:      GET    "/v1/sandboxes/{id}/computer/screen",                       getComputerScreenSize,     auth, Computer::screen_size;
    GET_COMPUTER_CURSOR:           GET    "/v1/sandboxes/{id}/computer/cursor",                       getComputerCursor,         auth, Computer::cursor;
    GET_COMPUTER_SCREENSHOT:       GET    "/v1/sandboxes/{id}/computer/screenshot",                   getComputerScreenshot,     auth, Computer::screenshot;
    GET_COMPUTER_CLIPBOARD:        GET    "/v1/sandboxes/{id}/computer/clipboard",                    getComputerClipboard,      auth, Computer::clipboard;
    SET_COMPUTER_CLIPBOARD:        PUT    "/v1/sandboxes/{id}/computer/clipboard",                    setComputerClipboard,      auth, Computer::set_clipboard;
    COMPUTER_OPEN:                 POST   "/v1/sandboxes/{id}/computer/open",                         computerOpen,              auth, Computer::open;
    COMPUTER_LAUNCH:               POST   "/v1/sandboxes/{id}/computer/launch",                       computerLaunch,            auth, Computer::launch;
    COMPUTER_MOUSE_MOVE:           POST   "/v1/sandboxes/{id}/computer/mouse/move",                   computerMouseMove,         auth, Computer::mouse_move;
    COMPUTER_MOUSE_CLICK:          POST   "/v1/sandboxes/{id}/computer/mouse/click",                  computerMouseClick,        auth, Computer::mouse_click;
    COMPUTER_MOUSE_SCROLL:         POST   "/v1/sandboxes/{id}/computer/mouse/scroll",                 computerMouseScroll,       auth, Computer::mouse_scroll;
    COMPUTER_MOUSE_DRAG:           POST   "/v1/sandboxes/{id}/computer/mouse/drag",                   computerMouseDrag,         auth, Computer::mouse_drag;
    COMPUTER_MOUSE_DOWN:           POST   "/v1/sandboxes/{id}/computer/mouse/down",                   computerMouseDown,         auth, Computer::mouse_down;
    COMPUTER_MOUSE_UP:             POST   "/v1/sandboxes/{id}/computer/mouse/up",                     computerMouseUp,           auth, Computer::mouse_up;
    COMPUTER_KEYBOARD_TYPE:        POST   "/v1/sandboxes/{id}/computer/keyboard/type",                computerKeyboardType,      auth, Computer::type_text;
    COMPUTER_KEYBOARD_PRESS:       POST   "/v1/sandboxes/{id}/computer/keyboard/press",               computerKeyboardPress,     auth, Computer::press_keys;
    COMPUTER_KEYBOARD_DOWN:        POST   "/v1/sandboxes/{id}/computer/keyboard/down",                computerKeyboardDown,      auth, Computer::keys_down;
    COMPUTER_KEYBOARD_UP:          POST   "/v1/sandboxes/{id}/computer/keyboard/up",                  computerKeyboardUp,        auth, Computer::keys_up;
    LIST_COMPUTER_WINDOWS:         GET    "/v1/sandboxes/{id}/computer/windows",                      listComputerWindows,       auth, Computer::windows;
    GET_COMPUTER_CURRENT_WINDOW:   GET    "/v1/sandboxes/{id}/computer/windows/current",              getComputerCurrentWindow,  auth, Computer::current_window;
    GET_COMPUTER_WINDOW:           GET    "/v1/sandboxes/{id}/computer/windows/{window_id}",          getComputerWindow,         auth, Computer::window;
    GET_COMPUTER_WINDOW_GEOMETRY:  GET    "/v1/sandboxes/{id}/computer/windows/{window_id}/geometry", getComputerWindowGeometry, auth, Computer::window_geometry;
    FOCUS_COMPUTER_WINDOW:         POST   "/v1/sandboxes/{id}/computer/windows/{window_id}/focus",    focusComputerWindow,       auth, Computer::focus_window;
    MOVE_COMPUTER_WINDOW:          POST   "/v1/sandboxes/{id}/computer/windows/{window_id}/move",     moveComputerWindow,        auth, Computer::move_window;
    RESIZE_COMPUTER_WINDOW:        POST   "/v1/sandboxes/{id}/computer/windows/{window_id}/resize",   resizeComputerWindow,      auth, Computer::resize_window;
    MAXIMIZE_COMPUTER_WINDOW:      POST   "/v1/sandboxes/{id}/computer/windows/{window_id}/maximize", maximizeComputerWindow,    auth, Computer::maximize_window;
    MINIMIZE_COMPUTER_WINDOW:      POST   "/v1/sandboxes/{id}/computer/windows/{window_id}/minimize", minimizeComputerWindow,    auth, Computer::minimize_window;
    RESTORE_COMPUTER_WINDOW:       POST   "/v1/sandboxes/{id}/computer/windows/{window_id}/restore",  restoreComputerWindow,     auth, Computer::restore_window;
    CLOSE_COMPUTER_WINDOW:         DELETE "/v1/sandboxes/{id}/computer/windows/{window_id}",          closeComputerWindow,       auth, Computer::close_window;
    LIST_COMPUTER_SCREENS:         GET    "/v1/sandboxes/{id}/computer/screens",                      listComputerScreens,       auth, Computer::screens;
    CREATE_COMPUTER_SCREEN:        POST   "/v1/sandboxes/{id}/computer/screens",                      createComputerScreen,      auth, Computer::create_screen;
    GET_COMPUTER_SCREEN:           GET    "/v1/sandboxes/{id}/computer/screens/{screen_id}",          getComputerScreen,         auth, Computer::screen;
    DELETE_COMPUTER_SCREEN:        DELETE "/v1/sandboxes/{id}/computer/screens/{screen_id}",          deleteComputerScreen,      auth, Computer::delete_screen;
    RESIZE_COMPUTER_SCREEN:        POST   "/v1/sandboxes/{id}/computer/screens/{screen_id}/resize",   resizeComputerScreen,      auth, Computer::resize_screen;
    CONNECT_COMPUTER_SCREEN:       GET    "/v1/sandboxes/{id}/computer/screens/{screen_id}/connect",  connectComputerScreen,     auth, Computer::connect_screen;
    REGISTER_DEVICE:               POST   "/v1/devices",                                              registerDevice,            auth, Client::register_device;
    LIST_DEVICES:                  GET    "/v1/devices",                                              listDevices,               auth, Client::list_devices;
    GET_DEVICE:                    GET    "/v1/devices/{device_id}",                                  getDevice,                 auth, Client::get_device;
    REVOKE_DEVICE:                 DELETE "/v1/devices/{device_id}",                                  revokeDevice,              auth, Client::revoke_device;
    ATTACH_DEVICE_NETWORK:         POST   "/v1/devices/{device_id}/networks",                         attachDeviceNetwork,       auth, Client::attach_device_network;
    LIST_DEVICE_NETWORKS:          GET    "/v1/devices/{device_id}/networks",                         listDeviceNetworks,        auth, Client::list_device_networks;
    DETACH_DEVICE_NETWORK:         DELETE "/v1/devices/{device_id}/networks/{network}",               detachDeviceNetwork,       auth, Client::detach_device_network;
    OPEN_DEVICE_SESSION:           POST   "/v1/devices/{device_id}/sessions",                         openDeviceSession,         auth, Client::open_device_session;
    RENEW_DEVICE_SESSION:          PUT    "/v1/devices/{device_id}/sessions/{session_id}",            renewDeviceSession,        auth, Client::renew_device_session;
    CLOSE_DEVICE_SESSION:          DELETE "/v1/devices/{device_id}/sessions/{session_id}",            closeDeviceSession,        auth, Client::close_device_session;
}
