"""One lock around h2's connection state, for threaded httpx clients.

httpcore 0.16 (Debian's) drives one h2.connection.H2Connection from every
thread of a client without a lock: two threads can take the same stream
id (h2: "Invalid input StreamInputs.SEND_HEADERS"), or queue their
HEADERS out of stream order or of HPACK order (the server's GOAWAY:
PROTOCOL_ERROR, COMPRESSION_ERROR), and a frame appended while another
thread takes data_to_send() is lost. A slower process (ASan preloaded)
meets it often, with no request limit as well. Tests that measure the
shim's pacing need the client's own bytes right: import this first.

The stream id a thread is given stays its own until its send_headers
(the lock is re-entrant: taken in get_next_available_stream_id, let go
after send_headers); every other call that changes the state is made
under the lock.
"""
import threading

import h2.connection

_lock = threading.RLock()
_mine = threading.local()  # this thread holds a stream id not yet opened
_C = h2.connection.H2Connection


def _locked(f):
    def call(self, *a, **k):
        with _lock:
            return f(self, *a, **k)
    return call


for _name in ("data_to_send", "receive_data", "increment_flow_control_window",
              "acknowledge_received_data", "end_stream", "reset_stream",
              "send_data", "initiate_connection", "close_connection",
              "update_settings", "ping"):
    setattr(_C, _name, _locked(getattr(_C, _name)))

_next_id = _C.get_next_available_stream_id
_send_headers = _C.send_headers


def _get_next_available_stream_id(self):
    _lock.acquire()
    try:
        sid = _next_id(self)
    except BaseException:
        _lock.release()
        raise
    if getattr(_mine, "held", False):
        _lock.release()  # (asked twice: one hold is enough)
    _mine.held = True
    return sid


def _send_headers_locked(self, *a, **k):
    with _lock:
        try:
            return _send_headers(self, *a, **k)
        finally:
            if getattr(_mine, "held", False):
                _mine.held = False
                _lock.release()


_C.get_next_available_stream_id = _get_next_available_stream_id
_C.send_headers = _send_headers_locked
