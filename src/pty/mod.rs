//! Interactive terminals: shells on a fresh PTY over `/shell` (a raw HTTP/1.1 Upgrade, E31) and
//! `/shell-ws` (a WebSocket, E32), both as a [`ShellSession`], with the client frame codec
//! ([`ShellCodec`]) they share; [`attach`] bridges a local terminal to a managed PTY process,
//! and [`tty`] holds the local terminal's raw mode and size.
//!
//! Open one with [`crate::Sandbox::shell`] or [`crate::Sandbox::shell_ws`]. Both send one
//! resize frame right after connecting, so the shell starts at the caller's terminal size.

pub mod attach;
mod codec;
mod session;
pub mod tty;

use std::io;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, Message};
use tokio_util::codec::FramedWrite;

pub use codec::{ShellCodec, ShellFrame, FRAME_DATA, FRAME_RESIZE, MAX_FRAME};
pub use session::{ShellControl, ShellInput, ShellOutput, ShellSession, INPUT_FRAME};

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::transport::upgrade::{self, Failure, TCP_TUNNEL};
use crate::transport::{jsend, Call};

fn check_size(rows: u16, cols: u16) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(Error::invalid(
            "size",
            format!("{rows}x{cols} is not a terminal size (rows and cols ≥ 1)"),
        ));
    }
    Ok(())
}

/// E31: the raw upgrade. Output is the read half as it comes; input goes through the codec.
pub(crate) async fn open_raw(sandbox: &Sandbox, rows: u16, cols: u16) -> Result<ShellSession> {
    check_size(rows, cols)?;
    let call = Call::new(&ep::OPEN_SHELL).param(sandbox.id());
    let upgraded = upgrade::upgrade(&sandbox.client.transport, call, TCP_TUNNEL).await?;
    let (output, write) = upgraded.into_output_and_input();
    let sink = FramedWrite::new(write, ShellCodec::default());
    Ok(ShellSession::start(output.boxed(), sink, rows, cols))
}

fn ws_io_error(err: tungstenite::Error) -> io::Error {
    match err {
        tungstenite::Error::Io(e) => e,
        other => io::Error::new(io::ErrorKind::ConnectionAborted, other),
    }
}

/// E32: the same session over a WebSocket. Client frames travel as binary messages (one frame
/// each); binary (and, leniently, text) messages from the server are PTY output; a close
/// message ends the output.
pub(crate) async fn open_ws(sandbox: &Sandbox, rows: u16, cols: u16) -> Result<ShellSession> {
    check_size(rows, cols)?;
    let transport = &sandbox.client.transport;
    let call = Call::new(&ep::OPEN_SHELL_WEB_SOCKET).param(sandbox.id());
    let label = ep::OPEN_SHELL_WEB_SOCKET.label();
    let url = transport.url(&call.path()?, &[])?;
    let mut ws_url = url.clone();
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    ws_url.set_scheme(scheme).map_err(|_| {
        Error::invalid(
            "base_url",
            format!("{} cannot carry a WebSocket", url.scheme()),
        )
    })?;
    let head_timeout = transport.timeouts.request;
    let socket = upgrade::with_retries(transport, ep::OPEN_SHELL_WEB_SOCKET.auth, |auth| {
        let (url, ws_url, label) = (&url, &ws_url, &label);
        async move {
            let conn = upgrade::dial(
                url,
                &transport.upgrade_tls,
                transport.timeouts.connect,
                label,
            )
            .await
            .map_err(|error| Failure {
                error,
                before_send: true,
            })?;
            let mut request = ws_url
                .as_str()
                .into_client_request()
                .map_err(|e| Error::invalid("base_url", format!("not a WebSocket URL: {e}")))?;
            let headers = request.headers_mut();
            headers.insert(http::header::USER_AGENT, transport.user_agent.clone());
            if let Some((name, value)) = auth {
                headers.insert(name, value);
            }
            let handshake = tokio_tungstenite::client_async(request, conn);
            let answer =
                match head_timeout {
                    Some(limit) => tokio::time::timeout(limit, handshake).await.map_err(|_| {
                        Error::Timeout {
                            endpoint: label.clone(),
                            after: limit,
                        }
                    })?,
                    None => handshake.await,
                };
            match answer {
                Ok((socket, _)) => Ok(socket),
                Err(tungstenite::Error::Http(response)) => {
                    let body = response.body().clone().unwrap_or_default();
                    let body = &body[..body.len().min(upgrade::MAX_REFUSAL_BODY)];
                    Err(Failure::from(jsend::error_from_answer(
                        label,
                        response.status().as_u16(),
                        response.headers(),
                        body,
                    )))
                }
                Err(e) => Err(Failure::from(Error::Connection {
                    endpoint: label.clone(),
                    source: Box::new(e),
                })),
            }
        }
    })
    .await?;
    let (sink, stream) = socket.split();
    let sink = sink.sink_map_err(ws_io_error).with(|frame: ShellFrame| {
        futures::future::ready(Ok::<_, io::Error>(Message::Binary(codec::encode_frames([
            frame,
        ]))))
    });
    let output = stream
        .take_while(|message| {
            let open = !matches!(
                message,
                Ok(Message::Close(_))
                    | Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed)
            );
            futures::future::ready(open)
        })
        .filter_map(|message| {
            futures::future::ready(match message {
                Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
                Ok(Message::Text(text)) => Some(Ok(Bytes::copy_from_slice(text.as_bytes()))),
                Ok(_) => None, // ping/pong are handled by the protocol layer
                Err(e) => Some(Err(ws_io_error(e))),
            })
        });
    Ok(ShellSession::start(
        output.boxed(),
        Box::pin(sink),
        rows,
        cols,
    ))
}
