//! `upcommit healthcheck`: asks the server this host runs for `/readyz` and exits 0 when it
//! answers 2xx, 1 otherwise. The container image's HEALTHCHECK runs it (the runtime image has
//! no curl), as can any probe that can only run a command.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::config::Settings;

/// A probe that hangs is a failed probe, well before a runtime's own timeout (podman's and
/// docker's default is 30 s). `/readyz` itself answers from a probe at most a second old.
const TIMEOUT: Duration = Duration::from_secs(5);

/// `/readyz` on the address `serve` binds (`UPCOMMIT_LISTEN`): a wildcard bind (`0.0.0.0`,
/// `[::]`) is reached on the loopback address of its family; a host name or a specific address
/// is used as written.
pub fn readyz_url(listen: &str) -> String {
    let host = match listen.parse::<SocketAddr>() {
        Ok(addr) => {
            let ip = match addr.ip() {
                IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                ip => ip,
            };
            SocketAddr::new(ip, addr.port()).to_string()
        }
        Err(_) => listen.to_owned(),
    };
    format!("http://{host}/readyz")
}

/// GETs `url` (default: [`readyz_url`] of the settings' listen address); prints the status and
/// the readiness report, which a runtime keeps in its health log. 0 when ready, 1 otherwise.
pub async fn run(settings: &Settings, url: Option<&str>) -> i32 {
    let url = match url {
        Some(url) => url.to_owned(),
        None if settings.listen.ends_with(":0") => {
            eprintln!(
                "upcommit healthcheck: UPCOMMIT_LISTEN has port 0 (picked at start): pass --url"
            );
            return 1;
        }
        None => readyz_url(&settings.listen),
    };
    let client = match crate::outbound::client() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("upcommit healthcheck: {e}");
            return 1;
        }
    };
    let response = match client.get(&url).timeout(TIMEOUT).send().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("upcommit healthcheck: GET {url}: {e}");
            return 1;
        }
    };
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    println!("{} {}", status.as_u16(), body.trim());
    if status.is_success() {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::readyz_url;

    #[test]
    fn a_wildcard_bind_is_probed_on_the_loopback_address_of_its_family() {
        assert_eq!(readyz_url("0.0.0.0:8080"), "http://127.0.0.1:8080/readyz");
        assert_eq!(readyz_url("[::]:9000"), "http://[::1]:9000/readyz");
    }

    #[test]
    fn a_specific_address_or_a_host_name_is_probed_as_written() {
        assert_eq!(readyz_url("127.0.0.1:8080"), "http://127.0.0.1:8080/readyz");
        assert_eq!(readyz_url("10.1.2.3:80"), "http://10.1.2.3:80/readyz");
        assert_eq!(readyz_url("[::1]:8080"), "http://[::1]:8080/readyz");
        assert_eq!(readyz_url("localhost:8080"), "http://localhost:8080/readyz");
    }
}
