import socket,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,8<<20); s.setsockopt(socket.SOL_UDP,104,1)
s.bind(('0.0.0.0',7000)); s.settimeout(4); b=bytearray(70000); n=0
try:
    while True: n+=s.recv_into(b)
except socket.timeout: pass
print('recv GB', n/1e9)
