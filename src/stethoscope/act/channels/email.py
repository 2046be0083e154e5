"""Email over SMTP (stdlib `smtplib`), STARTTLS optional, login optional. The password is the secret."""

from __future__ import annotations

import smtplib
import socket
import ssl
import threading
from email.message import EmailMessage

from stethoscope.act.alert import Alert
from stethoscope.act.channels.base import DeliveryError


class Email:
    """Sends the alert's text as a plain-text mail to `to` (one address or several)."""

    name = "email"

    def __init__(self, host: str, to: str | list[str], sender: str = "stethoscope@localhost", port: int = 25,
                 starttls: bool = False, username: str | None = None, password: str | None = None,
                 min_severity: str = "error", timeout: float = 5.0) -> None:
        self.recipients = [to] if isinstance(to, str) else list(to)
        if not host or not self.recipients or not all(isinstance(r, str) and "@" in r for r in self.recipients):
            raise ValueError("email needs a host and recipients in `to` (addresses with an @)")
        self.host, self.port, self.sender, self.starttls = host, int(port), sender, starttls
        self.username, self._password = username, password
        self.min_severity = min_severity
        self.timeout = timeout
        self.target = f"{', '.join(self.recipients)} via {host}:{self.port}"
        self.secrets = (password,) if password else ()
        self._smtp: smtplib.SMTP | None = None
        self._lock = threading.Lock()

    def send(self, alert: Alert) -> None:
        msg = EmailMessage()
        msg["Subject"] = alert.title()
        msg["From"] = self.sender
        msg["To"] = ", ".join(self.recipients)
        msg.set_content(alert.text() + "\n")
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                with self._lock:
                    self._smtp = smtp
                if self.starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self.username:
                    smtp.login(self.username, self._password or "")
                smtp.send_message(msg)
        except (TimeoutError, socket.timeout):
            raise DeliveryError(f"no answer within {self.timeout:g} s") from None
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(f"SMTP login refused ({exc.smtp_code})", retryable=False) from None
        except smtplib.SMTPResponseException as exc:
            raise DeliveryError(f"SMTP {exc.smtp_code}", retryable=exc.smtp_code >= 400 and exc.smtp_code < 500) \
                from None
        except (OSError, smtplib.SMTPException) as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from None
        finally:
            with self._lock:
                self._smtp = None

    def abort(self) -> None:
        with self._lock:
            sock = getattr(self._smtp, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
