// kinreg live view: the page's logic. Events (Server-Sent Events on /events):
//   pose, refine  JSON as `kinreg sub --format json` prints them
//   status        JSON likewise
//   model         base64 of one model record chunk, exactly as on the wire
//                 (docs/PROTOCOL.md, "Model record")
//   mesh          base64 of one mesh record chunk likewise ("Mesh record")
//   history       [[frame, x, y, z, state, refine], ...]: the trajectory so far
//   hub           {"clients", "dropped" (this page), "dropped_all"}
// The page keeps its own state as JSON in #kinreg-state, for tests and for
// anyone who wants to check what it shows against the stream.
"use strict";

const STATE_NAMES = ["good", "poor", "lost"];
const STATE_COLORS = [[0.37, 0.83, 0.48], [0.94, 0.71, 0.24], [1.0, 0.36, 0.36]];
const MAX_TRAJECTORY = 200000;
const PLOT_SAMPLES = 300;

const state = {
  connected: false, connects: 0, restarts: 0, poses: 0, refines: 0, gaps: 0,
  pose_seq: null, pose_frame: null, pose_t: null, pose_q: null, pose_state: null,
  latency_ms: null, fps_out: 0, fps_in: null, status_event: null, status_fps: null,
  frames_in: 0, frames_total: 0, source_progress: null, frames_out: 0, frames_lost: 0,
  model_points_total: 0, recoveries: 0, losses: 0,
  model_snapshot: null, model_frame: null, model_points: 0, model_first: null,
  model_snapshots: 0, model_incomplete: 0, viewers: 0, dropped: 0, webgl: false, three: false,
  model_colours: null, plot_axes: false, follow: false, follow_moves: 0,
  depth_frames: 0, depth_frame: null, depth_size: null, depth_valid: null, depth_range_m: null,
  mesh_snapshots: 0, mesh_snapshot: null, mesh_frame: null, mesh_faces: 0, mesh_vertices: 0,
  mesh_incomplete: 0, mesh_coloured: false, mesh_shown: false,
};

// ---- 3-D scene ---------------------------------------------------------------
let renderer = null, scene, camera, controls, world, trajectory, frustum, modelPoints, refined;
let surface = null; // the mesh topic's surface, once one has arrived
let fitted = false;

function buildScene() {
  if (typeof THREE === "undefined") return;
  state.three = true;
  const box = document.getElementById("scene");
  try {
    renderer = new THREE.WebGLRenderer({antialias: true, preserveDrawingBuffer: true});
  } catch (e) {
    box.textContent = "WebGL is not available in this browser: " + e.message;
    return;
  }
  state.webgl = true;
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.setClearColor(0x111418);
  box.appendChild(renderer.domElement);
  scene = new THREE.Scene();
  camera = new THREE.PerspectiveCamera(55, 1, 0.01, 200);
  camera.position.set(1.5, 1.2, 2.0);
  controls = new THREE.OrbitControls(camera, renderer.domElement);
  controls.enableDamping = true;
  // kinreg's world is the first camera's frame: x right, y down, z forward.
  // Turned half a turn about x, y points up on screen and the scene lies
  // in front of the default view.
  world = new THREE.Group();
  world.rotation.x = Math.PI;
  scene.add(world);
  world.add(new THREE.AxesHelper(0.2));
  const grid = new THREE.GridHelper(4, 20, 0x2c333d, 0x20262e);
  grid.rotation.x = Math.PI / 2; // in the first camera's image plane
  world.add(grid);

  const tg = new THREE.BufferGeometry();
  tg.setAttribute("position", new THREE.BufferAttribute(new Float32Array(MAX_TRAJECTORY * 3), 3));
  tg.setAttribute("color", new THREE.BufferAttribute(new Float32Array(MAX_TRAJECTORY * 3), 3));
  tg.setDrawRange(0, 0);
  trajectory = new THREE.Line(tg, new THREE.LineBasicMaterial({vertexColors: THREE.VertexColors}));
  trajectory.frustumCulled = false;
  world.add(trajectory);
  // WebGL draws lines one pixel wide: dots on the same vertices make the path visible.
  const dots = new THREE.Points(tg, new THREE.PointsMaterial({size: 0.025, vertexColors: THREE.VertexColors}));
  dots.frustumCulled = false;
  world.add(dots);

  const rg = new THREE.BufferGeometry();
  rg.setAttribute("position", new THREE.BufferAttribute(new Float32Array(20000 * 3), 3));
  rg.setDrawRange(0, 0);
  refined = new THREE.Points(rg, new THREE.PointsMaterial({color: 0xe070ff, size: 0.04}));
  refined.frustumCulled = false;
  world.add(refined);

  // Camera frustum: apex and a 640x480 image at 0.35 m with f = 525 px.
  const d = 0.35, x = d * 320 / 525, y = d * 240 / 525;
  const c = [[-x, -y, d], [x, -y, d], [x, y, d], [-x, y, d]];
  const v = [];
  for (let i = 0; i < 4; i++) v.push(0, 0, 0, ...c[i], ...c[i], ...c[(i + 1) % 4]);
  v.push(-x * 0.4, -y, d, 0, -y * 1.5, d, 0, -y * 1.5, d, x * 0.4, -y, d); // "up" marker
  const fg = new THREE.BufferGeometry();
  fg.setAttribute("position", new THREE.BufferAttribute(new Float32Array(v), 3));
  frustum = new THREE.LineSegments(fg, new THREE.LineBasicMaterial({color: 0x5fd47a}));
  frustum.visible = false;
  world.add(frustum);

  const mg = new THREE.BufferGeometry();
  mg.setAttribute("position", new THREE.BufferAttribute(new Float32Array(3), 3));
  mg.setAttribute("color", new THREE.BufferAttribute(new Float32Array(3), 3));
  mg.setDrawRange(0, 0);
  modelPoints = new THREE.Points(mg, new THREE.PointsMaterial({size: 0.012, vertexColors: THREE.VertexColors}));
  modelPoints.frustumCulled = false;
  world.add(modelPoints);

  // The surface (mesh topic): lit from above the first camera, both sides
  // drawn (a scan is seen from inside and outside).
  scene.add(new THREE.HemisphereLight(0xffffff, 0x30343a, 0.9));
  const sun = new THREE.DirectionalLight(0xffffff, 0.5);
  sun.position.set(0.5, 1, -0.8);
  scene.add(sun);
  surface = new THREE.Mesh(new THREE.BufferGeometry(),
                           new THREE.MeshLambertMaterial({vertexColors: THREE.VertexColors,
                                                          side: THREE.DoubleSide}));
  surface.frustumCulled = false;
  surface.visible = false;
  world.add(surface);
  const surfaceBox = document.getElementById("show-surface");
  surfaceBox.addEventListener("change", () => {
    showSurface = surfaceBox.checked;
    placeSurface();
  });

  controls.addEventListener("change", () => { if (state.stopped) renderer.render(scene, camera); });
  const followBox = document.getElementById("follow");
  followBox.checked = follow;
  state.follow = follow;
  followBox.addEventListener("change", () => {
    follow = state.follow = followBox.checked;
    followCamera();
  });
  window.addEventListener("resize", resize);
  resize();
  animate();
}

function resize() {
  const box = document.getElementById("scene");
  const w = box.clientWidth || 800, h = box.clientHeight || 600;
  renderer.setSize(w, h);
  camera.aspect = w / h;
  camera.updateProjectionMatrix();
  if (state.stopped) renderer.render(scene, camera);
}

// A still page (?still=N) draws its last frame and then only when the
// mouse moves the camera: redrawing a large model every frame in a software
// renderer is what kept headless browsers busy for a minute.
function animate() {
  controls.update();
  renderer.render(scene, camera);
  if (!state.stopped) requestAnimationFrame(animate);
}

// ---- trajectory --------------------------------------------------------------
let trajCount = 0, refinedCount = 0;

function clearTrajectory() {
  trajCount = 0;
  refinedCount = 0;
  if (trajectory) trajectory.geometry.setDrawRange(0, 0);
  if (refined) refined.geometry.setDrawRange(0, 0);
}

function addTrajectoryPoint(t, st) {
  if (!trajectory) return;
  if (trajCount === MAX_TRAJECTORY) { // full: keep every other point
    const p = trajectory.geometry.attributes.position.array, c = trajectory.geometry.attributes.color.array;
    for (let i = 0; i < MAX_TRAJECTORY / 2; i++)
      for (let k = 0; k < 3; k++) { p[3 * i + k] = p[6 * i + k]; c[3 * i + k] = c[6 * i + k]; }
    trajCount = MAX_TRAJECTORY / 2;
  }
  const pos = trajectory.geometry.attributes.position, col = trajectory.geometry.attributes.color;
  pos.array.set(t, 3 * trajCount);
  col.array.set(STATE_COLORS[st] || STATE_COLORS[2], 3 * trajCount);
  trajCount++;
  pos.needsUpdate = true;
  col.needsUpdate = true;
  trajectory.geometry.setDrawRange(0, trajCount);
}

function addRefined(t) {
  if (!refined || refinedCount === 20000) return;
  const pos = refined.geometry.attributes.position;
  pos.array.set(t, 3 * refinedCount++);
  pos.needsUpdate = true;
  refined.geometry.setDrawRange(0, refinedCount);
}

// ---- model snapshots ---------------------------------------------------------
let pending = null; // the snapshot being assembled from its chunks

function u64(dv, off) { return dv.getUint32(off, true) + 4294967296 * dv.getUint32(off + 4, true); }

function decodeModelChunk(b64) {
  const bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const dv = new DataView(bytes.buffer);
  if (bytes.length < 64 || String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]) !== "KRMD" ||
      dv.getUint16(6, true) !== 4) return null;
  const h = {
    seq: u64(dv, 8), snapshot: u64(dv, 16), frame: u64(dv, 24), total: dv.getUint32(32, true),
    first: dv.getUint32(36, true), count: dv.getUint32(40, true), chunk: dv.getUint16(44, true),
    chunks: dv.getUint16(46, true),
    origin: [dv.getFloat32(48, true), dv.getFloat32(52, true), dv.getFloat32(56, true)],
    scale: dv.getFloat32(60, true), dv: dv,
  };
  if (bytes.length !== 64 + 8 * h.count || h.first + h.count > h.total) return null;
  return h;
}

// Octahedral normal (docs/PROTOCOL.md): two bytes to a unit vector.
function unpackNormal(bu, bv, out) {
  let u = bu / 127.5 - 1, v = bv / 127.5 - 1;
  const z = 1 - Math.abs(u) - Math.abs(v);
  if (z < 0) {
    const fu = (1 - Math.abs(v)) * (u < 0 ? -1 : 1), fv = (1 - Math.abs(u)) * (v < 0 ? -1 : 1);
    u = fu; v = fv;
  }
  const l = Math.hypot(u, v, z);
  out[0] = u / l; out[1] = v / l; out[2] = z / l;
}

// Dark blue (low) to near white (high), every colour with blue ≥ green ≥
// red. Height is −y: kinreg's world is the first camera's frame, whose y
// points down the image. The span is fixed (2 m below the first camera to
// 1 m above), so a point keeps its colour from one snapshot to the next;
// brightness follows how squarely the surface faces the first camera.
const RAMP = [[0.12, 0.23, 0.45], [0.31, 0.56, 0.75], [0.90, 0.93, 0.96]];
// The colour at u (0 to 1) along RAMP, into out[k], out[k + 1], out[k + 2].
function rampColour(u, out, k) {
  const x = Math.min(Math.max(u, 0), 1) * (RAMP.length - 1);
  const i = Math.min(Math.floor(x), RAMP.length - 2), f = x - i;
  for (let a = 0; a < 3; a++) out[k + a] = RAMP[i][a] + f * (RAMP[i + 1][a] - RAMP[i][a]);
}
function heightColour(y, n, out, k) {
  rampColour((-y + 2) / 3, out, k);
  const shade = 0.55 + 0.45 * Math.abs(n[2]);
  for (let a = 0; a < 3; a++) out[k + a] *= shade;
}

function onModel(b64) {
  const h = decodeModelChunk(b64);
  if (!h) return;
  if (!pending || pending.snapshot !== h.snapshot) {
    if (pending) state.model_incomplete++; // a chunk of it was lost: wait for the next one
    pending = {snapshot: h.snapshot, frame: h.frame, total: h.total, chunks: h.chunks, got: 0,
               positions: new Float32Array(3 * h.total), colors: new Float32Array(3 * h.total), first: null};
  }
  const n = [0, 0, 0];
  for (let i = 0; i < h.count; i++) {
    const o = 64 + 8 * i, k = 3 * (h.first + i);
    for (let a = 0; a < 3; a++) pending.positions[k + a] = h.origin[a] + h.scale * h.dv.getUint16(o + 2 * a, true);
    unpackNormal(h.dv.getUint8(o + 6), h.dv.getUint8(o + 7), n);
    // A neutral ramp by height, shaded by the normal: green, amber, red and
    // magenta mean tracking states here, so the model uses none of them.
    heightColour(pending.positions[k + 1], n, pending.colors, k);
  }
  if (h.chunk === 0 && h.count) pending.first = Array.from(pending.positions.slice(0, 3));
  pending.got++;
  if (pending.got === pending.chunks) showModel(pending);
}

function showModel(s) {
  pending = null;
  state.model_snapshot = s.snapshot;
  state.model_frame = s.frame;
  state.model_points = s.total;
  state.model_first = s.first;
  state.model_snapshots++;
  if (!modelPoints) return;
  const g = modelPoints.geometry;
  g.setAttribute("position", new THREE.BufferAttribute(s.positions, 3));
  g.setAttribute("color", new THREE.BufferAttribute(s.colors, 3));
  g.setDrawRange(0, s.total);
  // For the page's test: the model's colours stay off the state colours.
  let ordered = true;
  for (let k = 0; k < 3 * s.total && ordered; k += 3)
    ordered = s.colors[k + 2] >= s.colors[k + 1] && s.colors[k + 1] >= s.colors[k];
  state.model_colours = ordered ? "height" : "mixed";
  if (!fitted && s.total > 0) fitView(s.positions);
}

// ---- the surface (mesh snapshots) ---------------------------------------------
// Chunks stand alone (their own vertices and triangles); a snapshot is shown
// once all of its chunks are here, replacing the one before.
let pendingMesh = null, showSurface = true;

function decodeMeshChunk(b64) {
  const bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const dv = new DataView(bytes.buffer);
  if (bytes.length < 64 || bin.slice(0, 4) !== "KRMS" || dv.getUint16(6, true) !== 7) return null;
  const h = {
    snapshot: u64(dv, 16), frame: u64(dv, 24), total: dv.getUint32(32, true),
    vertices: dv.getUint16(40, true), faces: dv.getUint16(42, true), chunks: dv.getUint16(46, true),
    origin: [dv.getFloat32(48, true), dv.getFloat32(52, true), dv.getFloat32(56, true)],
    scale: dv.getFloat32(60, true), dv: dv,
  };
  if (bytes.length !== 64 + 12 * h.vertices + 6 * h.faces) return null;
  return h;
}

function onMesh(b64) {
  const h = decodeMeshChunk(b64);
  if (!h) return;
  if (!pendingMesh || pendingMesh.snapshot !== h.snapshot) {
    if (pendingMesh) state.mesh_incomplete++; // a chunk was lost: wait for the next refresh
    pendingMesh = {snapshot: h.snapshot, frame: h.frame, total: h.total, chunks: h.chunks, got: 0,
                   parts: [], vertices: 0, faces: 0, coloured: false};
  }
  // The chunk's vertices: position, normal, and the measured colour where
  // there is one (a = 255), else the model's height ramp.
  const n = [0, 0, 0], pos = new Float32Array(3 * h.vertices), nrm = new Float32Array(3 * h.vertices),
        col = new Float32Array(3 * h.vertices);
  for (let i = 0; i < h.vertices; i++) {
    const o = 64 + 12 * i, k = 3 * i;
    for (let a = 0; a < 3; a++) pos[k + a] = h.origin[a] + h.scale * h.dv.getUint16(o + 2 * a, true);
    unpackNormal(h.dv.getUint8(o + 6), h.dv.getUint8(o + 7), n);
    nrm.set(n, k);
    if (h.dv.getUint8(o + 11) === 255) {
      for (let a = 0; a < 3; a++) col[k + a] = h.dv.getUint8(o + 8 + a) / 255;
      pendingMesh.coloured = true;
    } else {
      heightColour(pos[k + 1], n, col, k);
    }
  }
  const idx = new Uint32Array(3 * h.faces), f0 = 64 + 12 * h.vertices;
  for (let i = 0; i < 3 * h.faces; i++) idx[i] = h.dv.getUint16(f0 + 2 * i, true);
  pendingMesh.parts.push({pos: pos, nrm: nrm, col: col, idx: idx});
  pendingMesh.vertices += h.vertices;
  pendingMesh.faces += h.faces;
  pendingMesh.got++;
  if (pendingMesh.got === pendingMesh.chunks) showMesh(pendingMesh);
}

function showMesh(m) {
  pendingMesh = null;
  state.mesh_snapshots++;
  state.mesh_snapshot = m.snapshot;
  state.mesh_frame = m.frame;
  state.mesh_faces = m.faces;
  state.mesh_vertices = m.vertices;
  state.mesh_coloured = m.coloured;
  if (!surface) return;
  // One geometry: the chunks' vertices one after another, their indices
  // moved along with them.
  const pos = new Float32Array(3 * m.vertices), nrm = new Float32Array(3 * m.vertices),
        col = new Float32Array(3 * m.vertices), idx = new Uint32Array(3 * m.faces);
  let v = 0, f = 0;
  for (const p of m.parts) {
    pos.set(p.pos, 3 * v);
    nrm.set(p.nrm, 3 * v);
    col.set(p.col, 3 * v);
    for (let i = 0; i < p.idx.length; i++) idx[f + i] = p.idx[i] + v;
    v += p.pos.length / 3;
    f += p.idx.length;
  }
  const g = new THREE.BufferGeometry();
  g.setAttribute("position", new THREE.BufferAttribute(pos, 3));
  g.setAttribute("normal", new THREE.BufferAttribute(nrm, 3));
  g.setAttribute("color", new THREE.BufferAttribute(col, 3));
  g.setIndex(new THREE.BufferAttribute(idx, 1));
  surface.geometry.dispose();
  surface.geometry = g;
  document.getElementById("surface-row").style.display = "";
  placeSurface();
  if (!fitted && m.vertices > 0) fitView(pos);
  if (state.stopped) renderer.render(scene, camera);
}

// While the surface is shown, the model's points are not: they lie on it.
function placeSurface() {
  state.mesh_shown = showSurface && state.mesh_snapshots > 0;
  surface.visible = state.mesh_shown;
  modelPoints.visible = !state.mesh_shown;
  if (state.stopped) renderer.render(scene, camera);
}

// The first model: orbit around its centre, seen from a little above and
// behind the first camera (kinreg's origin), the way the sensor saw it; the
// trajectory and frustum then lie between the eye and the scene. (A scan is
// usually a room seen from inside: from outside, its walls hide the rest.)
function fitView(p) {
  fitted = true;
  const c = new THREE.Vector3();
  const n = p.length / 3;
  for (let i = 0; i < n; i++) c.x += p[3 * i], c.y += p[3 * i + 1], c.z += p[3 * i + 2];
  c.divideScalar(n);
  let r = 0;
  for (let i = 0; i < n; i += 7)
    r = Math.max(r, Math.hypot(p[3 * i] - c.x, p[3 * i + 1] - c.y, p[3 * i + 2] - c.z));
  const eye = new THREE.Vector3(0.1 * c.x, -0.25 * r - 0.3, -0.35 * r - 0.6);
  world.updateMatrixWorld();
  // Aim between the scene's centre and the origin, where the path starts.
  controls.target.copy(c.multiplyScalar(0.6).applyMatrix4(world.matrixWorld));
  camera.position.copy(eye.applyMatrix4(world.matrixWorld));
  controls.update();
}

// ---- counters and plot ---------------------------------------------------------
const samples = []; // {inl, rms}
let lastStatus = null;

function text(id, v) { document.getElementById(id).textContent = v; }

function fmt(v, d) { return v === null || v === undefined || !isFinite(v) ? "–" : v.toFixed(d); }

function onPose(m) {
  if (state.pose_seq !== null && m.seq <= state.pose_seq) { // the publisher restarted
    state.restarts++;
    clearTrajectory();
    samples.length = 0;
  }
  state.poses++;
  state.gaps += m.gap;
  state.pose_seq = m.seq;
  state.pose_frame = m.frame;
  state.pose_t = m.t;
  state.pose_q = m.q;
  state.pose_state = m.state;
  state.latency_ms = m.latency_ms;
  const st = Math.max(0, STATE_NAMES.indexOf(m.state));
  addTrajectoryPoint(m.t, st);
  if (frustum) {
    frustum.visible = true;
    frustum.position.set(m.t[0], m.t[1], m.t[2]);
    frustum.quaternion.set(m.q[0], m.q[1], m.q[2], m.q[3]);
    frustum.material.color.setRGB(...STATE_COLORS[st]);
    followCamera();
  }
  samples.push({inl: m.inlier_fraction, rms: m.rms});
  if (samples.length > PLOT_SAMPLES) samples.shift();
}

// Follow mode (the checkbox, or "?follow"): the orbit's centre rides with the
// sensor, the eye keeping its offset, so a long scan stays in view; the
// mouse still orbits and zooms about it.
let follow = new URLSearchParams(location.search).has("follow");
function followCamera() {
  if (!follow || !frustum || !controls) return;
  const p = new THREE.Vector3();
  frustum.getWorldPosition(p);
  const d = p.sub(controls.target);
  controls.target.add(d);
  camera.position.add(d);
  controls.update();
  state.follow_moves++;
}

function onRefine(m) {
  state.refines++;
  addRefined(m.t);
}

// Rates come from the stream, not the page's clock (which a headless browser
// runs on virtual time): out = the tracker's recent rate (status fps), in =
// that rate times frames read per frame tracked since the last status.
function onStatus(m) {
  if (lastStatus && m.frames_out > lastStatus.frames_out && isFinite(m.fps))
    state.fps_in = m.fps * (m.frames_in - lastStatus.frames_in) / (m.frames_out - lastStatus.frames_out);
  lastStatus = {frames_in: m.frames_in, frames_out: m.frames_out};
  if (m.event === "recovered") state.recoveries++;
  if (m.event === "lost") state.losses++;
  state.status_event = m.event;
  state.status_fps = m.fps;
  state.fps_out = m.fps;
  state.frames_in = m.frames_in;
  // A replay's length (0 for a live sensor, or a sender before wire version 4).
  state.frames_total = m.frames_total || 0;
  state.source_progress = state.frames_total ? Math.min(1, m.frames_in / state.frames_total) : null;
  state.frames_out = m.frames_out;
  state.frames_lost = m.frames_lost;
  state.model_points_total = m.model_points;
}

function onHistory(list) {
  clearTrajectory();
  for (const [, x, y, z, st, ref] of list) {
    if (ref) addRefined([x, y, z]);
    else addTrajectoryPoint([x, y, z], st);
  }
}

function drawPlot() {
  const cv = document.getElementById("plot"), g = cv.getContext("2d");
  const w = cv.width, h = cv.height;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#2c333d";
  for (let i = 1; i < 4; i++) { g.beginPath(); g.moveTo(0, h * i / 4); g.lineTo(w, h * i / 4); g.stroke(); }
  let rmsMax = 0;
  for (const s of samples) if (isFinite(s.rms)) rmsMax = Math.max(rmsMax, s.rms);
  rmsMax = rmsMax > 0 ? rmsMax * 1.1 : 1;
  text("c-rms-max", "(0–" + (rmsMax * 1000).toPrecision(2) + " mm)");
  const line = (key, max, color) => {
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.beginPath();
    let pen = false;
    samples.forEach((s, i) => {
      const v = s[key];
      if (v === null || !isFinite(v)) { pen = false; return; }
      const x = w * i / (PLOT_SAMPLES - 1), y = h - 2 - (h - 4) * Math.min(v / max, 1);
      if (pen) g.lineTo(x, y); else g.moveTo(x, y);
      pen = true;
    });
    g.stroke();
  };
  line("inl", 1, "#5fd47a");
  line("rms", rmsMax, "#58a6ff");
  // Axes: each curve's scale at its own side, time along the bottom.
  g.font = "10px sans-serif";
  g.fillStyle = "#5fd47a";
  g.textAlign = "left";
  g.fillText("1", 3, 11);
  g.fillText("0.5", 3, h / 2 + 4);
  g.fillText("0", 3, h - 4);
  g.fillStyle = "#58a6ff";
  g.textAlign = "right";
  g.fillText((rmsMax * 1000).toPrecision(2) + " mm", w - 3, 11);
  g.fillText("0", w - 3, h - 4);
  g.fillStyle = "#8b95a3";
  g.textAlign = "center";
  g.fillText("last " + PLOT_SAMPLES + " frames → now", w / 2, h - 4);
  state.plot_axes = true;
}

function refresh() {
  const conn = document.getElementById("conn");
  conn.textContent = state.connected ? "live" : state.stopped ? "still" : "reconnecting";
  conn.className = state.connected ? "up" : "";
  const st = document.getElementById("c-state");
  st.textContent = state.pose_state || "–";
  st.className = "v " + (state.pose_state || "");
  text("c-frames", state.frames_out || (state.pose_frame === null ? 0 : state.pose_frame + 1));
  text("c-source", state.frames_total
    ? state.frames_in + " of " + state.frames_total + " (" + Math.round(100 * state.source_progress) + "%)"
    : state.frames_in + (state.status_event ? " (live)" : ""));
  document.getElementById("progress-bar").style.width =
    state.source_progress === null ? "0" : (100 * state.source_progress).toFixed(1) + "%";
  text("c-fps", fmt(state.fps_in, 1) + " / " + fmt(state.fps_out, 1));
  text("c-latency", fmt(state.latency_ms, 1) + " ms");
  text("c-lost", state.frames_lost);
  text("c-recoveries", state.losses + " (" + state.recoveries + ")");
  text("c-model", state.model_points + " / " + state.model_points_total);
  text("c-mesh", state.mesh_faces + " (" + state.mesh_snapshots + ")");
  text("c-refined", state.refines);
  text("c-gaps", state.gaps + " / " + state.viewers + (state.dropped ? " (" + state.dropped + " dropped)" : ""));
  drawPlot();
  document.getElementById("kinreg-state").textContent = JSON.stringify(state);
}

// The latest depth frame: the `depth` record (docs/PROTOCOL.md) as base64,
// millimetres subsampled by the sender, drawn near = light, far = dark on the
// model's blue ramp (no state colours); no depth is black.
function onDepth(b64) {
  const bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const dv = new DataView(bytes.buffer);
  if (bytes.length < 40 || bin.slice(0, 4) !== "KRDP") return;
  const w = dv.getUint16(32, true), h = dv.getUint16(34, true);
  if (bytes.length !== 40 + 2 * w * h) return;
  let lo = Infinity, hi = 0, valid = 0;
  for (let i = 0; i < w * h; i++) {
    const v = dv.getUint16(40 + 2 * i, true);
    if (v) { valid++; lo = Math.min(lo, v); hi = Math.max(hi, v); }
  }
  const cv = document.getElementById("depth");
  cv.width = w;
  cv.height = h;
  const g = cv.getContext("2d"), img = g.createImageData(w, h), c = [0, 0, 0];
  for (let i = 0; i < w * h; i++) {
    const v = dv.getUint16(40 + 2 * i, true);
    if (v) rampColour(1 - (v - lo) / Math.max(hi - lo, 1), c, 0);
    for (let a = 0; a < 3; a++) img.data[4 * i + a] = v ? 255 * c[a] : 0;
    img.data[4 * i + 3] = 255;
  }
  g.putImageData(img, 0, 0);
  state.depth_frames++;
  state.depth_frame = dv.getUint32(16, true) + 4294967296 * dv.getUint32(20, true);
  state.depth_size = w + "x" + h;
  state.depth_valid = valid / (w * h);
  state.depth_range_m = valid ? [lo / 1000, hi / 1000] : null;
  text("c-depth", valid ? "frame " + state.depth_frame + ", " + (lo / 1000).toFixed(2) + "–" +
       (hi / 1000).toFixed(2) + " m" : "frame " + state.depth_frame + ", no depth");
}

// ---- the stream ------------------------------------------------------------------
// "?still=N": stop listening once N poses and one whole model have arrived,
// leaving the page as it was then. Headless browsers (the view's test, a
// screenshot script) need this: they wait for the network to go quiet.
const still = Number(new URLSearchParams(location.search).get("still")) || 0;
state.still = still;
state.stopped = false;

// "&mesh": and one whole surface.
const stillMesh = new URLSearchParams(location.search).has("mesh");

function maybeStill(es) {
  if (!still || state.poses < still || state.model_snapshots < 1) return;
  if (stillMesh && state.mesh_snapshots < 1) return;
  // A depth frame too, unless the stream has none (a sender before version 4).
  if (state.depth_frames < 1 && state.poses < 2 * still) return;
  es.close();
  state.connected = false;
  state.stopped = true;
  refresh();
}

function connect() {
  const es = new EventSource("events");
  es.onopen = () => { state.connected = true; state.connects++; };
  // EventSource reconnects by itself (the server asks for 1 s); the page
  // shows the gap meanwhile. An answer other than a stream (503 while the
  // server has as many pages as it serves) closes it for good: the page
  // tries again itself after 2 s.
  es.onerror = () => {
    state.connected = false;
    if (es.readyState === EventSource.CLOSED && !state.stopped) setTimeout(connect, 2000);
  };
  es.addEventListener("pose", e => { onPose(JSON.parse(e.data)); maybeStill(es); });
  es.addEventListener("refine", e => onRefine(JSON.parse(e.data)));
  es.addEventListener("status", e => onStatus(JSON.parse(e.data)));
  es.addEventListener("model", e => { onModel(e.data); maybeStill(es); });
  es.addEventListener("depth", e => { onDepth(e.data); maybeStill(es); });
  es.addEventListener("mesh", e => { onMesh(e.data); maybeStill(es); });
  es.addEventListener("history", e => onHistory(JSON.parse(e.data)));
  es.addEventListener("hub", e => {
    const h = JSON.parse(e.data);
    state.viewers = h.clients;
    state.dropped = h.dropped;
  });
}

buildScene();
connect();
setInterval(refresh, 250);
