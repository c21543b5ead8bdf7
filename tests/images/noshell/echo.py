"""A line echo server on TCP 7000: the whole "system under test" of the no-shell image."""

import socket
import threading


def serve(conn: socket.socket) -> None:
    with conn, conn.makefile("rb") as lines:
        for line in lines:
            conn.sendall(line)


def main() -> None:
    server = socket.create_server(("0.0.0.0", 7000), reuse_port=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
