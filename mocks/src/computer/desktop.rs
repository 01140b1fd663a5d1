//! The whole desktop of one sandbox: its screens (`screen-0` always exists), window
//! ids, and the screenshot rate-limit window.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::model::{DesktopError, Screen, DEFAULT_SCREEN_SIZE, MAX_SCREENS};

/// The whole desktop of one sandbox.
#[derive(Debug, Clone)]
pub struct Desktop {
    pub screens: BTreeMap<u8, Screen>,
    next_window: u64,
    /// Recent screenshot instants (rate limit window).
    shots: VecDeque<Instant>,
}

impl Default for Desktop {
    fn default() -> Self {
        let (w, h) = DEFAULT_SCREEN_SIZE;
        let mut screens = BTreeMap::new();
        screens.insert(0, Screen::new(0, w, h));
        Desktop {
            screens,
            next_window: 0,
            shots: VecDeque::new(),
        }
    }
}

impl Desktop {
    pub fn screen(&self, n: u8) -> Result<&Screen, DesktopError> {
        self.screens.get(&n).ok_or(DesktopError::ScreenNotFound)
    }

    pub fn screen_mut(&mut self, n: u8) -> Result<&mut Screen, DesktopError> {
        self.screens.get_mut(&n).ok_or(DesktopError::ScreenNotFound)
    }

    /// Starts a new X screen on the lowest free display number.
    pub fn create_screen(&mut self, width: u32, height: u32) -> Result<&Screen, DesktopError> {
        let n = (0..MAX_SCREENS)
            .find(|n| !self.screens.contains_key(n))
            .ok_or(DesktopError::ScreenLimit)?;
        Ok(self
            .screens
            .entry(n)
            .or_insert_with(|| Screen::new(n, width, height)))
    }

    /// Stops a screen and everything on it; screen-0 is the session's own display.
    pub fn delete_screen(&mut self, n: u8) -> Result<(), DesktopError> {
        if n == 0 {
            return Err(DesktopError::invalid(
                "screen_id",
                "screen-0 cannot be deleted",
            ));
        }
        self.screens
            .remove(&n)
            .map(|_| ())
            .ok_or(DesktopError::ScreenNotFound)
    }

    /// The same session for a fork child, minus its noVNC links and screenshot budget.
    pub fn fork_copy(&self) -> Desktop {
        let mut copy = self.clone();
        copy.shots.clear();
        for screen in copy.screens.values_mut() {
            screen.connection = None;
        }
        copy
    }

    /// A fresh X-style window id, unique within the desktop.
    pub fn new_window_id(&mut self) -> String {
        self.next_window += 1;
        format!("0x{:08x}", 0x0140_0003u64 + (self.next_window << 21))
    }

    /// Records a screenshot unless `limit` were already taken in the last second; on
    /// refusal returns how long until the oldest of them leaves the window.
    pub fn admit_screenshot(&mut self, limit: u32, now: Instant) -> Result<(), Duration> {
        if limit == 0 {
            return Ok(());
        }
        let window = Duration::from_secs(1);
        while self
            .shots
            .front()
            .is_some_and(|t| now.duration_since(*t) >= window)
        {
            self.shots.pop_front();
        }
        if self.shots.len() >= limit as usize {
            let oldest = self.shots.front().copied().unwrap_or(now);
            return Err(window.saturating_sub(now.duration_since(oldest)));
        }
        self.shots.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::computer::model::parse_screen_id;

    #[test]
    fn screen_ids_parse_strictly() {
        assert_eq!(parse_screen_id("screen-0").unwrap(), 0);
        assert_eq!(parse_screen_id("screen-7").unwrap(), 7);
        for bad in [
            "screen-8",
            "screen-01",
            "screen-",
            "0",
            "Screen-1",
            "screen--1",
        ] {
            assert!(parse_screen_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn screens_are_limited_and_screen_zero_stays() {
        let mut d = Desktop::default();
        for n in 1..MAX_SCREENS {
            assert_eq!(d.create_screen(640, 480).unwrap().number, n);
        }
        assert_eq!(
            d.create_screen(640, 480).unwrap_err(),
            DesktopError::ScreenLimit
        );
        assert!(d.delete_screen(0).is_err());
        d.delete_screen(3).unwrap();
        assert_eq!(d.create_screen(640, 480).unwrap().number, 3);
    }

    #[test]
    fn screenshot_rate_limit_counts_one_second() {
        let mut d = Desktop::default();
        let t0 = Instant::now();
        assert!(d.admit_screenshot(2, t0).is_ok());
        assert!(d.admit_screenshot(2, t0).is_ok());
        assert!(d
            .admit_screenshot(2, t0 + Duration::from_millis(100))
            .is_err());
        assert!(d
            .admit_screenshot(2, t0 + Duration::from_millis(1000))
            .is_ok());
    }
}
