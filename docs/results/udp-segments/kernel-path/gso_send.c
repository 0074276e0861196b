#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); /* 0 malloc, 1 shm mmap */ int gso=atoi(argv[2]); const char*dst=argv[3];
  size_t region=3<<20; char*buf;
  if(mode==0){buf=aligned_alloc(4096,region);} else {int fd=open("/dev/shm/csend.buf",O_RDWR|O_CREAT,0600);ftruncate(fd,region);buf=mmap(0,region,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);}
  memset(buf,1,region);
  int s=socket(AF_INET,SOCK_DGRAM,0); int sb=4<<20; setsockopt(s,SOL_SOCKET,SO_SNDBUF,&sb,4);
  struct sockaddr_in a={.sin_family=AF_INET,.sin_port=htons(7000)}; inet_pton(AF_INET,dst,&a.sin_addr); connect(s,(void*)&a,sizeof a);
  if(gso){int g=1472; setsockopt(s,SOL_UDP,UDP_SEGMENT,&g,4);}
  size_t L=63488; long n=0; double t0=now(); size_t off=0;
  while(now()-t0<2.0){ if(send(s,buf+off,L,MSG_DONTWAIT)>0){n++;} off+=65536; if(off+L>region) off=0; }
  double dt=now()-t0; printf("mode %s gso %d: %.2f GB/s (%ld sends)\n", mode?"shm":"malloc", gso, n*L/dt/1e9, n);
  return 0;}
