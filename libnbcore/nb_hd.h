/* nb_hd.h - NB_HD: an inline function for the host and, where nvcc compiles
 * the file, for a CUDA device too.  Code written once for the CPU and the GPU
 * (engine/physics/nb_physics.h's pixel, nb_deviates.h's generator and
 * deviates) is marked with it. */
#ifndef NB_HD_H
#define NB_HD_H

#ifdef __CUDACC__
#define NB_HD __host__ __device__ static inline
#else
#define NB_HD static inline
#endif

#endif
