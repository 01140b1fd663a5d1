//! Computer use / desktop (E64–E97): the emulated X session of sandboxes booted on the
//! `desktop:1` image. Each such sandbox gets a [`Desktop`] with up to
//! eight screens; pointer, keyboard, clipboard and window-manager actions change that
//! state for real, and screenshots render it into PNGs.
//!
//! Module map: `desktop` (screens of a sandbox, rate-limit window), `model` (one screen:
//! windows, window management), `input` (pointer and
//! keyboard effects), `keys` (key names), `apps` (installed applications, titles,
//! `open` targets), `layout` (panel/frame geometry shared by input and rendering),
//! `screenshot` (renderer + PNG), `font` (5x7 glyphs), `access` (sandbox/desktop checks, error mapping),
//! `seed` (initial window content from the sandbox's files), and the route modules.

pub mod access;
pub mod apps;
pub mod desktop;
mod font;
pub mod input;
mod input_routes;
pub mod keys;
pub mod layout;
pub mod model;
pub mod routes;
mod screen_routes;
pub mod screenshot;
mod seed;
mod window_routes;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use desktop::Desktop;

/// Screenshots allowed per second per sandbox unless configured otherwise.
pub const DEFAULT_SCREENSHOTS_PER_SECOND: u32 = 10;

/// A shared, lockable desktop.
pub type DesktopCell = Arc<Mutex<Desktop>>;

/// Every sandbox's desktop, keyed by sandbox id, plus the desktop settings.
pub struct Desktops {
    desktops: Mutex<HashMap<String, DesktopCell>>,
    /// How long after a sandbox starts running its desktop answers 409 (booting).
    startup_delay_ms: AtomicU64,
    /// Screenshots per second per sandbox before 429 (0 = unlimited).
    screenshots_per_second: AtomicU32,
}

impl Default for Desktops {
    fn default() -> Self {
        Desktops {
            desktops: Mutex::new(HashMap::new()),
            startup_delay_ms: AtomicU64::new(0),
            screenshots_per_second: AtomicU32::new(DEFAULT_SCREENSHOTS_PER_SECOND),
        }
    }
}

impl std::fmt::Debug for Desktops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desktops")
            .field("desktops", &self.map().len())
            .field("startup_delay", &self.startup_delay())
            .field("screenshots_per_second", &self.screenshots_per_second())
            .finish()
    }
}

impl Desktops {
    fn map(&self) -> MutexGuard<'_, HashMap<String, DesktopCell>> {
        self.desktops.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The desktop of a sandbox, started on first use (screen-0 at 1280x800, no windows).
    pub fn desktop(&self, sandbox_id: &str) -> DesktopCell {
        Arc::clone(self.map().entry(sandbox_id.to_string()).or_default())
    }

    /// Drops a sandbox's desktop (called when the sandbox is destroyed).
    pub fn forget(&self, sandbox_id: &str) {
        self.map().remove(sandbox_id);
    }

    /// Gives a fork child a copy of its parent's desktop (a fork clones the VM's memory,
    /// X session included). noVNC links and the screenshot budget are not copied.
    pub fn copy_for_fork(&self, parent_id: &str, child_id: &str) {
        let parent = self.map().get(parent_id).cloned();
        if let Some(parent) = parent {
            let copy = lock_desktop(&parent).fork_copy();
            self.map()
                .insert(child_id.to_string(), Arc::new(Mutex::new(copy)));
        }
    }

    pub fn set_startup_delay(&self, delay: Duration) {
        self.startup_delay_ms.store(
            delay.as_millis().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    pub fn startup_delay(&self) -> Duration {
        Duration::from_millis(self.startup_delay_ms.load(Ordering::Relaxed))
    }

    /// Screenshots per second per sandbox before 429; 0 disables the limit.
    pub fn set_screenshots_per_second(&self, limit: u32) {
        self.screenshots_per_second.store(limit, Ordering::Relaxed);
    }

    pub fn screenshots_per_second(&self) -> u32 {
        self.screenshots_per_second.load(Ordering::Relaxed)
    }

    /// Whether `token` is the current, unexpired noVNC token of a sandbox's screen
    /// (`screen-N`); minting a new link invalidates the previous one.
    pub fn verify_connection_token(&self, sandbox_id: &str, screen_id: &str, token: &str) -> bool {
        let Ok(n) = model::parse_screen_id(screen_id) else {
            return false;
        };
        let Some(cell) = self.map().get(sandbox_id).cloned() else {
            return false;
        };
        let desktop = lock_desktop(&cell);
        let Ok(screen) = desktop.screen(n) else {
            return false;
        };
        screen.connection.as_ref().is_some_and(|c| {
            constant_time_eq(c.token.as_bytes(), token.as_bytes())
                && c.expires_at > crate::clock::now()
        })
    }
}

/// Locks a desktop, recovering from a poisoned lock (state stays usable).
pub fn lock_desktop(cell: &DesktopCell) -> MutexGuard<'_, Desktop> {
    cell.lock().unwrap_or_else(|e| e.into_inner())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desktops_are_per_sandbox_and_forgettable() {
        let d = Desktops::default();
        let a = d.desktop("sb-a");
        lock_desktop(&a).create_screen(640, 480).unwrap();
        assert_eq!(lock_desktop(&d.desktop("sb-a")).screens.len(), 2);
        assert_eq!(lock_desktop(&d.desktop("sb-b")).screens.len(), 1);
        d.copy_for_fork("sb-a", "sb-c");
        assert_eq!(lock_desktop(&d.desktop("sb-c")).screens.len(), 2);
        d.forget("sb-a");
        assert_eq!(lock_desktop(&d.desktop("sb-a")).screens.len(), 1);
    }

    #[test]
    fn settings_have_defaults() {
        let d = Desktops::default();
        assert_eq!(d.startup_delay(), Duration::ZERO);
        assert_eq!(d.screenshots_per_second(), DEFAULT_SCREENSHOTS_PER_SECOND);
        d.set_screenshots_per_second(3);
        assert_eq!(d.screenshots_per_second(), 3);
        assert!(!d.verify_connection_token("sb-x", "screen-0", "nope"));
    }
}
