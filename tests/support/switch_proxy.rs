//! A TCP proxy with an off switch, to take a server "down" and bring it back without
//! losing its state: while off, new connections are closed at once and open ones are cut.

use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy.
pub struct SwitchProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    up: watch::Sender<bool>,
}

impl SwitchProxy {
    /// Forwards a free loopback port to `target` (`host:port`).
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (up, watch) = watch::channel(true);
        let target = Arc::new(target);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { continue };
                let mut state = watch.clone();
                if !*state.borrow() {
                    drop(inbound);
                    continue;
                }
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target.as_str()).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = state.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        SwitchProxy { url, up }
    }

    /// Turns the proxy on or off.
    pub fn set_up(&self, up: bool) {
        self.up.send_replace(up);
    }
}
