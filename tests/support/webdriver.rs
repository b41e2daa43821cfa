//! Drives Debian's Chromium through `chromedriver` over the W3C WebDriver protocol: JSON
//! over HTTP on loopback, a dozen calls in all. A client crate (fantoccini, thirtyfour)
//! would bring an async HTTP stack with TLS to the test build for the same few calls.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::local_server::try_http;

/// The element reference key of the WebDriver protocol.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running `chromedriver` and one headless Chromium session; both end on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

/// Whether Chromium and chromedriver are installed (Debian's `chromium`, `chromium-driver`).
pub fn available() -> bool {
    Path::new("/usr/bin/chromium").is_file() && Path::new("/usr/bin/chromedriver").is_file()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP/1.1 exchange with chromedriver: the status and the JSON body.
fn exchange(port: u16, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    let payload = body.map(Value::to_string).unwrap_or_default();
    let headers = [("Content-Type", "application/json")];
    try_http(&format!("127.0.0.1:{port}"), method, path, &headers, payload.as_bytes()).map(|r| (r.status, r.body))
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile in `profile`, a
    /// window of `width` x `height`, and none of its calls to Google's services (this
    /// machine's network is closed; they would fail many times at each start).
    pub fn start(profile: &Path, width: u32, height: u32) -> Browser {
        let port = free_port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let mut browser = Browser { driver, port, session: String::new() };
        let t = Instant::now();
        while exchange(port, "GET", "/status", None).is_none_or(|(_, v)| v["value"]["ready"] != true) {
            assert!(t.elapsed() < Duration::from_secs(30), "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        let (status, v) = exchange(port, "POST", "/session", Some(&caps)).expect("chromedriver answers");
        assert_eq!(status, 200, "no browser session: {v}");
        browser.session = v["value"]["sessionId"].as_str().expect("a session id").to_string();
        browser
    }

    /// A command of this session: its `value`, or a panic naming the error.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let (status, v) = exchange(self.port, method, &path, body.as_ref()).expect("chromedriver answers");
        assert_eq!(status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})));
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page; its return value.
    pub fn script(&self, script: &str, args: Value) -> Value {
        self.command("POST", "/execute/sync", Some(json!({"script": script, "args": args})))
    }

    /// Polls `script` until it returns something other than `null`/`false`, for `limit`.
    pub fn wait_for(&self, script: &str, limit: Duration) -> Value {
        let t = Instant::now();
        loop {
            let v = self.script(script, json!([]));
            if !(v.is_null() || v == false) {
                return v;
            }
            assert!(t.elapsed() < limit, "timed out waiting for: {script}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn element(&self, css: &str) -> String {
        let v = self.command("POST", "/element", Some(json!({"using": "css selector", "value": css})));
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}: {v}")).to_string()
    }

    /// Types `text` into the element `css`, as a user does (key events).
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.command("POST", &format!("/element/{id}/clear"), Some(json!({})));
        self.command("POST", &format!("/element/{id}/value"), Some(json!({"text": text})));
    }

    /// Clicks the element `css`.
    pub fn click(&self, css: &str) {
        let id = self.element(css);
        self.command("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    /// The browser console's entries since the last call (CSP violations are among them).
    pub fn console(&self) -> Vec<Value> {
        let v = self.command("POST", "/se/log", Some(json!({"type": "browser"})));
        v.as_array().cloned().unwrap_or_default()
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let v = self.command("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD.decode(v.as_str().expect("base64")).expect("a PNG in base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = exchange(self.port, "DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
