package engine

// sysGetcpu is getcpu(2)'s number.
const sysGetcpu = 309
