"""trtexec's default two-in-flight loop against the worker's one-at-a-time loop, on a real GPU (cuda-python only).

The code below is exactly what ran on the device machine (an H200, driver 580.159.04, cuda-python
13.3.1, Python 3.12); docs/timing.md has its output. A stand-in engine is ``L`` launches of an NVRTC
kernel that spins ``us`` microseconds on the GPU's global timer. ``serial``: event, enqueue, event,
wait (the worker's ``time_serial``; trtexec with ``--exposeDMA``), run twice to see the drift of
one run to the next; ``overlap``: trtexec's default ``inferenceLoop`` with two slots
(sampleInference.cpp release/10.3:790, 1028-1087): enqueue query i, then wait for query i-1. The
kernels are launched from Python, one call each, so host-bound rows exaggerate the enqueue cost of a
TensorRT engine (one ``execute_async_v3`` call, its kernels launched from C++). Compute capability
9.0 is hard-coded (``compute_90``). Run: ``python3 benchmarks/timing_method.py``.
"""
import ctypes,statistics as S,json
from cuda.bindings import driver as d,nvrtc as n
def c(r):
  if int(r[0]):raise RuntimeError(str(r[0]))
  return r[1] if len(r)==2 else r[1:]
c(d.cuInit(0));dev=c(d.cuDeviceGet(0));ctx=c(d.cuDevicePrimaryCtxRetain(dev));c(d.cuCtxPushCurrent(ctx))
K=b'extern "C" __global__ void s(float*o,unsigned long long w){unsigned long long a,t;asm volatile("mov.u64 %0, %%globaltimer;":"=l"(a));do{asm volatile("mov.u64 %0, %%globaltimer;":"=l"(t));}while(t-a<w);if(!threadIdx.x)o[blockIdx.x]=t-a;}'
p=c(n.nvrtcCreateProgram(K,b"s.cu",0,[],[]));n.nvrtcCompileProgram(p,1,[b"--gpu-architecture=compute_90"])
z=n.nvrtcGetPTXSize(p)[1];x=b" "*z;n.nvrtcGetPTX(p,x);f=c(d.cuModuleGetFunction(c(d.cuModuleLoadData(x)),b"s"))
o=c(d.cuMemAlloc(4096));st=c(d.cuStreamCreate(1));E=lambda:c(d.cuEventCreate(0))
el=lambda a,b:c(d.cuEventElapsedTime(a,b))
def run(L,a):
  for _ in range(L):c(d.cuLaunchKernel(f,1,1,1,32,1,1,0,st,a,0))
N=1000
for L,us in((1,200.),(20,50.),(50,5.),(200,1.),(200,0.)):
  a=((int(o),int(us*1000)),(ctypes.c_void_p,ctypes.c_ulonglong))
  for _ in range(50):run(L,a)
  d.cuStreamSynchronize(st);s,e,fi=E(),E(),E();R=[]
  for _ in range(2):
   ser=[];d.cuEventRecord(fi,st)
   for _ in range(N):
    d.cuEventRecord(s,st);run(L,a);d.cuEventRecord(e,st);d.cuEventSynchronize(e);ser.append(el(s,e))
   R.append(S.median(ser))
  span=el(fi,e);sl=[(E(),E()),(E(),E())];ov=[]
  for i in range(N+1):
    s2,e2=sl[i%2];d.cuEventRecord(s2,st);run(L,a);d.cuEventRecord(e2,st)
    if i:ps,pe=sl[(i-1)%2];d.cuEventSynchronize(pe);ov.append(el(ps,pe))
  d.cuStreamSynchronize(st);a1,b1=R[0],S.median(ov)
  print(json.dumps(dict(layers=L,spin_us=us,serial_ms=round(a1,4),overlap_ms=round(b1,4),offset_ms=round(a1-b1,4),offset_pct=round(100*(a1-b1)/b1,1),serial_qps=round(N/span*1000),serial_again_pct=round(100*(R[1]-R[0])/R[0],2))))
