/* libfreenect's fakenect dump format, shared by the dump reader (fakenect:DIR),
 * the recorder and the live source:
 *
 *   INDEX.txt     one file name per line, in playback order
 *   d-T-K.pgm     a depth frame: T = host time of capture (seconds, "%f"),
 *                 K = the Kinect's 32-bit frame timestamp ("%u"); contents
 *                 "P5 640 480 65535\n" then 640·480 host-order uint16 samples
 *                 of raw 11-bit disparity
 *   r-T-K.ppm     colour frames, a-T-K.dump accelerometer records (ignored)
 *
 * fakenect replays the lines at the pace of their T values. */
#ifndef KINREG_CAPTURE_FAKENECT_FORMAT_H
#define KINREG_CAPTURE_FAKENECT_FORMAT_H

/* The Kinect v1 frame timestamp counts at 60 MHz (measured on the 2011
 * planes recording: 14 015 085 ticks per 7 frames at 30 Hz) and wraps
 * every 71.6 s. */
#define KR_KINECT_TICKS_PER_S 60000000.0

#endif
