/* The synthetic indoor scene: a room (floor, four walls, ceiling) and solid
 * primitives (oriented boxes, spheres, vertical capped cylinders), laid out
 * deterministically from a seed. World frame: z up, the floor is z = 0, the
 * room is centred on the origin. Tests read this description to compute
 * distances to the scene independently of the ray caster. */
#ifndef KINREG_CAPTURE_SYNTHETIC_SCENE_H
#define KINREG_CAPTURE_SYNTHETIC_SCENE_H

#include <stdbool.h>
#include <stdint.h>

#define KR_SYNTH_MAX_PRIMS 32

typedef enum {
    KR_SYNTH_BOX = 0,     /* half extents half[0..2] along its local axes; yaw about z */
    KR_SYNTH_SPHERE = 1,  /* radius half[0] */
    KR_SYNTH_CYLINDER = 2 /* radius half[0], half height half[2]; axis = world z */
} kr_synth_kind;

typedef struct {
    kr_synth_kind kind;
    double c[3];    /* centre, world metres */
    double half[3]; /* see kr_synth_kind */
    double yaw;     /* boxes: local x axis = (cos yaw, sin yaw, 0) */
} kr_synth_prim;

typedef struct {
    double room_min[3], room_max[3]; /* the room's inner faces */
    bool ceiling;                    /* false: rays leaving through the top get no return */
    double target[3];                /* the scene centre the camera looks at */
    int count;
    kr_synth_prim prims[KR_SYNTH_MAX_PRIMS];
} kr_synth_scene;

void kr_synth_scene_build(uint64_t seed, kr_synth_scene *scene);

/* The scene's colours: primitive `prim` (0 … count − 1) has one of a
 * palette of saturated colours, chosen by its index; with prim < 0 the
 * room's face `face` (0 floor … as room_min/room_max: 2·axis + (max side))
 * has one of six light tints. What the colour stream shows and tests
 * check meshes against. */
void kr_synth_colour(int prim, int face, uint8_t rgb[3]);

/* Bounding sphere radius of a primitive around its centre. */
double kr_synth_prim_radius(const kr_synth_prim *p);

#endif
