//! Computer use (E64–E97) against the emulator: every operation on a `desktop:1` sandbox, with
//! the state each one leaves behind, plus the client-side checks that keep bad input off the wire.

mod common;

use std::time::Duration;

use createos_sandbox::api::computer::{
    Computer, MouseButton, MouseClick, Point, ScreenSize, ScreenshotRegion, ScrollDirection,
};
use createos_sandbox::api::sandboxes::{CreateSandbox, UpdateSandbox};
use createos_sandbox::{Error, Sandbox};

const SHAPE: &str = "s-1vcpu-1gb";
const READY: Duration = Duration::from_secs(60);

async fn desktop(env: &common::Env, ingress: bool) -> (Sandbox, Computer, ScreenSize) {
    let request = CreateSandbox::new(SHAPE)
        .rootfs("desktop:1")
        .ingress(ingress);
    let sandbox = env
        .client
        .create_sandbox(request)
        .await
        .expect("desktop sandbox");
    let computer = sandbox.computer();
    assert_eq!(computer.screen_id(), "screen-0");
    let size = computer
        .wait_until_ready(READY)
        .await
        .expect("desktop comes up");
    assert!(size.width > 0 && size.height > 0, "{size:?}");
    (sandbox, computer, size)
}

/// Width and height from the IHDR chunk, which must follow the signature.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 33, "PNG too short: {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(
        u32::from_be_bytes(png[8..12].try_into().unwrap()),
        13,
        "IHDR length"
    );
    assert_eq!(&png[12..16], b"IHDR", "first chunk");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (width, height)
}

fn is_invalid(result: Result<impl std::fmt::Debug, Error>, field: &str) {
    match result {
        Err(Error::InvalidInput { field: f, .. }) => {
            assert!(f.contains(field), "field {f:?}, wanted {field:?}")
        }
        other => panic!("expected an input error on {field}, got {other:?}"),
    }
}

fn status_of<T: std::fmt::Debug>(result: Result<T, Error>) -> u16 {
    match result {
        Err(e) => e
            .status()
            .unwrap_or_else(|| panic!("not an API error: {e:?}")),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

#[tokio::test]
async fn screen_size_cursor_and_pointer_actions() {
    let env = common::start().await;
    let (_sandbox, computer, size) = desktop(&env, false).await;
    assert_eq!(computer.screen_size().await.unwrap(), size);

    computer.mouse_move((10, 20)).await.unwrap();
    let cursor = computer.cursor().await.unwrap();
    assert_eq!((cursor.x, cursor.y), (10, 20));
    assert_eq!(Point::from(cursor), Point::new(10, 20));

    computer
        .mouse_click(MouseClick::new(MouseButton::Left).at((30, 40)).count(2))
        .await
        .unwrap();
    let cursor = computer.cursor().await.unwrap();
    assert_eq!(
        (cursor.x, cursor.y),
        (30, 40),
        "a click at a point moves the pointer there"
    );

    // Without a position the click happens where the pointer is, and leaves it there.
    computer
        .mouse_click(MouseClick::new(MouseButton::Right))
        .await
        .unwrap();
    assert_eq!(
        Point::from(computer.cursor().await.unwrap()),
        Point::new(30, 40)
    );

    computer.mouse_drag((5, 6), (50, 60)).await.unwrap();
    assert_eq!(
        Point::from(computer.cursor().await.unwrap()),
        Point::new(50, 60),
        "drag ends at `to`"
    );

    computer
        .mouse_scroll(ScrollDirection::Down, 3)
        .await
        .unwrap();
    computer.mouse_scroll(ScrollDirection::Up, 1).await.unwrap();
    computer.mouse_down(MouseButton::Left).await.unwrap();
    computer.mouse_move((70, 80)).await.unwrap();
    computer.mouse_up(MouseButton::Left).await.unwrap();
    assert_eq!(
        Point::from(computer.cursor().await.unwrap()),
        Point::new(70, 80)
    );

    computer.type_text("hello, desktop", None).await.unwrap();
    computer
        .type_text("slow", Some(Duration::from_millis(1)))
        .await
        .unwrap();
    computer.press_keys(["ctrl", "l"]).await.unwrap();
    computer.keys_down(["shift"]).await.unwrap();
    computer.keys_up(["shift"]).await.unwrap();

    // The server's own checks: unknown keys are 400 and change nothing.
    match computer.press_keys(["no-such-key-name"]).await {
        Err(Error::Validation(api)) => assert!(api.fields.contains_key("keys"), "{api:?}"),
        other => panic!("unknown key accepted: {other:?}"),
    }
    assert_eq!(
        Point::from(computer.cursor().await.unwrap()),
        Point::new(70, 80)
    );
    assert!(size.contains(Point::new(70, 80)));

    for op in [
        "getComputerScreenSize",
        "getComputerCursor",
        "computerMouseMove",
        "computerMouseClick",
        "computerMouseScroll",
        "computerMouseDrag",
        "computerMouseDown",
        "computerMouseUp",
        "computerKeyboardType",
        "computerKeyboardPress",
        "computerKeyboardDown",
        "computerKeyboardUp",
    ] {
        assert!(env.handled(op).await > 0, "{op} was never handled");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn clipboard_round_trip() {
    let env = common::start().await;
    let (_sandbox, computer, _) = desktop(&env, false).await;
    let text = "clip: ünïcödé ✓\nsecond line";
    computer.set_clipboard(text).await.unwrap();
    assert_eq!(computer.clipboard().await.unwrap().text, text);
    computer.set_clipboard("replaced").await.unwrap();
    assert_eq!(computer.clipboard().await.unwrap().text, "replaced");
    env.shutdown().await;
}

#[tokio::test]
async fn launch_open_and_window_management() {
    let env = common::start().await;
    let (_sandbox, computer, size) = desktop(&env, false).await;
    let before = computer.windows(None).await.unwrap();

    computer.launch("xfce4-terminal", None).await.unwrap();
    let terminals = computer.windows(Some("xfce4-terminal")).await.unwrap();
    assert_eq!(terminals.len(), 1, "{terminals:?}");
    let term = terminals[0].clone();
    assert!(
        !before.iter().any(|w| w.id == term.id),
        "launch made a new window"
    );
    assert!(
        term.title.as_deref().is_some_and(|t| !t.is_empty()),
        "{term:?}"
    );
    assert_eq!(
        computer.current_window().await.unwrap().id,
        term.id,
        "a launched window gets the focus"
    );

    computer.open("https://example.com/").await.unwrap();
    let all = computer.windows(None).await.unwrap();
    assert_eq!(all.len(), before.len() + 2, "open added a window: {all:?}");
    let browser = all
        .iter()
        .find(|w| w.id != term.id && !before.iter().any(|b| b.id == w.id))
        .unwrap()
        .clone();
    assert_ne!(browser.id, term.id);
    // An application that is not installed is refused and opens nothing.
    assert!(computer
        .launch("no-such-application-xyz", None)
        .await
        .is_err());
    assert_eq!(computer.windows(None).await.unwrap().len(), all.len());

    // Focus moves back to the terminal.
    computer.focus_window(&term.id).await.unwrap();
    assert_eq!(computer.current_window().await.unwrap().id, term.id);
    let fetched = computer.window(&term.id).await.unwrap();
    assert_eq!(fetched.id, term.id);
    assert_eq!(fetched.title, term.title);

    // Geometry follows move and resize.
    computer.move_window(&term.id, (100, 120)).await.unwrap();
    computer.resize_window(&term.id, 300, 200).await.unwrap();
    let geo = computer.window_geometry(&term.id).await.unwrap();
    assert_eq!(geo.id, term.id);
    assert_eq!(
        (geo.x, geo.y, geo.width, geo.height, geo.screen),
        (100, 120, 300, 200, 0)
    );

    // Maximize fills the screen's width and reaches its bottom (a panel may keep the top);
    // restore brings the previous geometry back.
    computer.maximize_window(&term.id).await.unwrap();
    let max = computer.window_geometry(&term.id).await.unwrap();
    assert_eq!((max.x, max.width), (0, size.width), "{max:?}");
    assert!(
        max.y >= 0 && max.y as u32 + max.height == size.height,
        "{max:?}"
    );
    assert!(max.height > size.height / 2, "{max:?}");
    assert_eq!(
        computer.current_window().await.unwrap().id,
        term.id,
        "maximize activates"
    );
    computer.restore_window(&term.id).await.unwrap();
    let geo = computer.window_geometry(&term.id).await.unwrap();
    assert_eq!((geo.x, geo.y, geo.width, geo.height), (100, 120, 300, 200));

    // A minimized window loses the focus; restore gives its geometry back.
    computer.minimize_window(&term.id).await.unwrap();
    let current = computer.current_window().await;
    assert!(
        current.as_ref().map(|w| w.id != term.id).unwrap_or(true),
        "minimized window kept the focus: {current:?}"
    );
    computer.restore_window(&term.id).await.unwrap();
    let geo = computer.window_geometry(&term.id).await.unwrap();
    assert_eq!((geo.x, geo.y, geo.width, geo.height), (100, 120, 300, 200));

    // Close: the window is gone from the list and by id.
    computer.close_window(&term.id).await.unwrap();
    let after = computer.windows(None).await.unwrap();
    assert!(!after.iter().any(|w| w.id == term.id), "{after:?}");
    assert!(computer
        .windows(Some("xfce4-terminal"))
        .await
        .unwrap()
        .is_empty());
    match computer.window(&term.id).await {
        Err(Error::NotFound(api)) => assert!(api.fields.contains_key("window"), "{api:?}"),
        other => panic!("closed window still readable: {other:?}"),
    }
    assert!(matches!(
        computer.window_geometry("0x7fffffff").await,
        Err(Error::NotFound(_))
    ));
    env.shutdown().await;
}

#[tokio::test]
async fn screenshots_are_png_of_the_asked_region() {
    let env = common::start().await;
    let (_sandbox, computer, size) = desktop(&env, false).await;

    let full = computer
        .screenshot(ScreenshotRegion::full_screen())
        .await
        .unwrap();
    assert_eq!(png_size(&full), (size.width, size.height));

    let crop = computer
        .screenshot(ScreenshotRegion::rect(10, 20, 64, 32))
        .await
        .unwrap();
    assert_eq!(png_size(&crop), (64, 32));

    computer.launch("xfce4-terminal", None).await.unwrap();
    let term = computer
        .windows(Some("xfce4-terminal"))
        .await
        .unwrap()
        .remove(0);
    computer.resize_window(&term.id, 240, 160).await.unwrap();
    let shot = computer
        .screenshot(ScreenshotRegion::window(&term.id))
        .await
        .unwrap();
    assert_eq!(png_size(&shot), (240, 160));
    let geo = computer.window_geometry(&term.id).await.unwrap();
    let around = ScreenshotRegion::rect(geo.x, geo.y, geo.width, geo.height);
    assert_eq!(
        computer.screenshot(around).await.unwrap(),
        shot,
        "window capture = its rectangle"
    );
    assert!(matches!(
        computer
            .screenshot(ScreenshotRegion::window("0x7fffffff"))
            .await,
        Err(Error::NotFound(_))
    ));

    // A rectangle past the screen edge is the server's 400.
    let region = ScreenshotRegion::rect(i32::try_from(size.width).unwrap() - 1, 0, 10, 10);
    assert_eq!(status_of(computer.screenshot(region).await), 400);
    env.shutdown().await;
}

#[tokio::test]
async fn screens_create_get_resize_delete() {
    let env = common::start().await;
    let (_sandbox, computer, size) = desktop(&env, false).await;

    let screens = computer.screens().await.unwrap();
    assert_eq!(screens.len(), 1, "{screens:?}");
    assert_eq!(screens[0].screen_id, "screen-0");
    assert_eq!(screens[0].size(), size);
    assert!(!screens[0].display.is_empty());

    let created = computer
        .create_screen(Some(ScreenSize::new(800, 600)))
        .await
        .unwrap();
    assert_eq!(created.screen_id, "screen-1");
    assert_eq!((created.width, created.height), (800, 600));
    assert!(created.vnc_port > 0 && created.novnc_port > 0);
    assert_ne!(created.display, screens[0].display);
    assert_eq!(computer.screen("screen-1").await.unwrap(), created);
    assert_eq!(computer.screens().await.unwrap().len(), 2);

    // A screen created without a size copies screen-0's.
    let second = computer.create_screen(None).await.unwrap();
    assert_eq!(second.screen_id, "screen-2");
    assert_eq!(second.size(), size);

    // The `screen_id` query picks the screen the other routes act on.
    let on_one = computer.on_screen("screen-1").unwrap();
    assert_eq!(on_one.screen_id(), "screen-1");
    assert_eq!(
        on_one.screen_size().await.unwrap(),
        ScreenSize::new(800, 600)
    );
    on_one.mouse_move((700, 500)).await.unwrap();
    assert_eq!(
        Point::from(on_one.cursor().await.unwrap()),
        Point::new(700, 500)
    );
    assert_ne!(
        Point::from(computer.cursor().await.unwrap()),
        Point::new(700, 500),
        "screens have their own pointer"
    );
    assert_eq!(
        png_size(
            &on_one
                .screenshot(ScreenshotRegion::default())
                .await
                .unwrap()
        ),
        (800, 600)
    );

    let resized = computer
        .resize_screen("screen-1", ScreenSize::new(1024, 700))
        .await
        .unwrap();
    assert_eq!(
        (resized.screen_id.as_str(), resized.width, resized.height),
        ("screen-1", 1024, 700)
    );
    assert_eq!(
        on_one.screen_size().await.unwrap(),
        ScreenSize::new(1024, 700)
    );
    assert_eq!(
        computer.screen("screen-1").await.unwrap().size(),
        ScreenSize::new(1024, 700)
    );

    computer.delete_screen("screen-1").await.unwrap();
    match computer.screen("screen-1").await {
        Err(Error::NotFound(api)) => assert!(api.fields.contains_key("screen"), "{api:?}"),
        other => panic!("deleted screen still there: {other:?}"),
    }
    assert!(
        matches!(on_one.screen_size().await, Err(Error::NotFound(_))),
        "routes on a deleted screen are 404"
    );
    let ids: Vec<String> = computer
        .screens()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.screen_id)
        .collect();
    assert_eq!(ids, ["screen-0", "screen-2"]);
    // The lowest free id is reused.
    assert_eq!(
        computer.create_screen(None).await.unwrap().screen_id,
        "screen-1"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn connect_needs_ingress_and_redacts_the_link() {
    let env = common::start().await;
    let (sandbox, computer, _) = desktop(&env, false).await;

    match computer.connect_screen("screen-0").await {
        Err(Error::Conflict(api)) => assert!(api.message.contains("ingress"), "{api:?}"),
        other => panic!("connect without ingress: {other:?}"),
    }

    sandbox
        .update(UpdateSandbox {
            ingress_enabled: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let link = computer.connect_screen("screen-0").await.unwrap();
    assert_eq!(link.screen_id, "screen-0");
    assert!(link.port > 0);
    assert!(!link.path.is_empty());
    assert!(!link.token.is_empty());
    assert!(
        link.expires_at.as_deref().is_some_and(|t| t.ends_with('Z')),
        "{:?}",
        link.expires_at
    );
    let url = link.url.as_ref().expect("url").expose().to_string();
    assert!(
        url.contains(link.token.expose()),
        "the URL embeds the token"
    );
    let debug = format!("{link:?}");
    assert!(
        !debug.contains(link.token.expose()) && !debug.contains(&url),
        "{debug}"
    );

    // Each call mints a new link.
    let again = computer.connect_screen("screen-0").await.unwrap();
    assert_ne!(again.token.expose(), link.token.expose());

    // Another screen gets its own link.
    computer.create_screen(None).await.unwrap();
    assert_eq!(
        computer.connect_screen("screen-1").await.unwrap().screen_id,
        "screen-1"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn non_desktop_sandbox_answers_501() {
    let env = common::start().await;
    let sandbox = env
        .client
        .create_sandbox(CreateSandbox::new(SHAPE))
        .await
        .unwrap();
    let computer = sandbox.computer();
    match computer.screen_size().await {
        Err(Error::Server(api)) => assert_eq!(api.status, 501),
        other => panic!("expected 501, got {other:?}"),
    }
    // The readiness wait gives up at once on 501 instead of polling until its deadline.
    match computer.wait_until_ready(Duration::from_secs(600)).await {
        Err(Error::Server(api)) => assert_eq!(api.status, 501),
        other => panic!("expected 501, got {other:?}"),
    }
    assert_eq!(
        status_of(computer.screenshot(ScreenshotRegion::default()).await),
        501
    );
    assert_eq!(status_of(computer.screens().await), 501);
    env.shutdown().await;
}

#[tokio::test]
async fn readiness_wait_polls_through_a_booting_desktop() {
    let env = common::start().await;
    let desktops = &env.mock.state().computer;
    desktops.set_startup_delay(Duration::from_secs(3600));
    let request = CreateSandbox::new(SHAPE).rootfs("desktop:1");
    let sandbox = env.client.create_sandbox(request).await.unwrap();
    let computer = sandbox.computer();
    env.reset_stats().await;

    // Booting: 409 with the `desktop_unavailable` code.
    match computer.screen_size().await {
        Err(Error::Conflict(api)) => {
            assert_eq!(api.code.as_deref(), Some("desktop_unavailable"), "{api:?}")
        }
        other => panic!("expected 409 while booting, got {other:?}"),
    }

    // The wait keeps polling through 409s; the desktop comes up after its first poll.
    let waiter = tokio::spawn({
        let computer = computer.clone();
        async move { computer.wait_until_ready(READY).await }
    });
    while env.requests("getComputerScreenSize").await < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    desktops.set_startup_delay(Duration::ZERO);
    let size = waiter.await.unwrap().expect("ready once booted");
    assert_eq!(size, computer.screen_size().await.unwrap());
    assert_eq!(
        env.requests("getComputerScreenSize").await,
        4,
        "direct probe, one 409 poll, the answer, the check"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn readiness_wait_times_out_or_stops_on_final_errors() {
    let env = common::start().await;
    let (sandbox, computer, _) = desktop(&env, false).await;

    env.add_fault("GET /v1/sandboxes/*/computer/screen status=409")
        .await;
    match computer.wait_until_ready(Duration::from_millis(300)).await {
        Err(Error::Timeout { endpoint, .. }) => {
            assert!(
                endpoint.contains("409") && endpoint.contains(sandbox.id()),
                "{endpoint}"
            )
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    env.clear_faults().await;

    // An unknown sandbox does not become a desktop by waiting.
    let ghost = env
        .client
        .sandbox("sb-01ARZ3NDEKTSV4RRFFQ69G5FAV")
        .unwrap()
        .computer();
    assert!(matches!(
        ghost.wait_until_ready(Duration::from_secs(600)).await,
        Err(Error::NotFound(_))
    ));
    // A 404 for a screen counts as "not yet" (the CLI's rule): it is polled until the deadline.
    let missing = computer.on_screen("screen-5").unwrap();
    assert!(matches!(
        missing.wait_until_ready(Duration::from_millis(50)).await,
        Err(Error::Timeout { .. })
    ));
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_sending() {
    let env = common::start().await;
    let sandbox = env
        .client
        .create_sandbox(CreateSandbox::new(SHAPE).rootfs("desktop:1"))
        .await
        .unwrap();
    let computer = sandbox.computer();
    env.reset_stats().await;

    for bad in [
        "screen-8",
        "screen-",
        "screen-01",
        "Screen-0",
        "",
        "../screen-0",
    ] {
        is_invalid(sandbox.computer_on(bad), "screen_id");
        is_invalid(computer.on_screen(bad), "screen_id");
        is_invalid(computer.screen(bad).await, "screen_id");
        is_invalid(
            computer.resize_screen(bad, ScreenSize::new(10, 10)).await,
            "screen_id",
        );
        is_invalid(computer.delete_screen(bad).await, "screen_id");
        is_invalid(computer.connect_screen(bad).await, "screen_id");
    }
    is_invalid(computer.delete_screen("screen-0").await, "screen_id");
    is_invalid(
        computer.create_screen(Some(ScreenSize::new(0, 600))).await,
        "width",
    );
    is_invalid(
        computer
            .resize_screen("screen-1", ScreenSize::new(800, 0))
            .await,
        "height",
    );

    is_invalid(computer.mouse_move((-1, 5)).await, "x");
    is_invalid(computer.mouse_move((5, -1)).await, "y");
    is_invalid(
        computer.mouse_click(MouseClick::default().count(0)).await,
        "count",
    );
    is_invalid(
        computer.mouse_click(MouseClick::default().count(11)).await,
        "count",
    );
    is_invalid(
        computer
            .mouse_click(MouseClick::default().at((-3, 0)))
            .await,
        "x",
    );
    is_invalid(
        computer.mouse_scroll(ScrollDirection::Up, 0).await,
        "amount",
    );
    is_invalid(computer.mouse_drag((0, 0), (0, -9)).await, "to");
    is_invalid(computer.type_text("", None).await, "text");
    is_invalid(
        computer.type_text("x", Some(Duration::from_secs(60))).await,
        "delay",
    );
    is_invalid(computer.press_keys(Vec::<String>::new()).await, "keys");
    is_invalid(computer.press_keys(["ctrl", ""]).await, "keys");
    is_invalid(computer.keys_down([" "]).await, "keys");
    is_invalid(computer.keys_up(Vec::<&str>::new()).await, "keys");
    is_invalid(computer.open("").await, "target");
    is_invalid(computer.launch("", None).await, "application");
    is_invalid(computer.window("").await, "window id");
    is_invalid(computer.window("0x1/../2").await, "window id");
    is_invalid(computer.focus_window("a b").await, "window id");
    is_invalid(computer.move_window("0x1", (-1, 0)).await, "x");
    is_invalid(computer.resize_window("0x1", 0, 10).await, "width");
    is_invalid(computer.close_window("").await, "window id");
    is_invalid(
        computer
            .screenshot(ScreenshotRegion::rect(0, 0, 0, 10))
            .await,
        "width",
    );
    is_invalid(
        computer
            .screenshot(ScreenshotRegion::window("bad id"))
            .await,
        "window id",
    );

    let stats = env.stats().await;
    let sent: u64 = stats["requests"]
        .as_object()
        .map(|ops| {
            ops.iter()
                .filter(|(op, _)| op.contains("omputer"))
                .filter_map(|(_, n)| n.as_u64())
                .sum()
        })
        .unwrap_or(0);
    assert_eq!(sent, 0, "nothing reached the emulator: {stats}");
    for op in [
        "getComputerScreen",
        "deleteComputerScreen",
        "connectComputerScreen",
        "computerMouseMove",
    ] {
        assert_eq!(env.requests(op).await, 0, "{op}");
    }
    env.shutdown().await;
}
