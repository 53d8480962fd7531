// 3D Gaussian splatting, shared by the CPU and CUDA kernels (host and device): the reference
// 3DGS rasteriser's conventions (graphdeco-inria's diff-gaussian-rasterization), written anew.
//
// A splat i has a world mean m, log scales, a quaternion (w, x, y, z), an opacity logit and
// spherical-harmonic colour coefficients sh[K][3]. For a pinhole camera (world-to-camera
// rotation R and translation t, focal lengths fx, fy, principal point cx, cy; pixel (x, y)
// covers [x, x + 1) x [y, y + 1), its centre at (x + 0.5, y + 0.5)):
//   - camera-space mean p = R m + t; splats with p.z <= 0.2 are culled;
//   - the EWA projection of the covariance S = Rq diag(s)^2 Rq^T:
//     cov2d = J R S R^T J^T + 0.3 I, J the perspective Jacobian at p with p.x/p.z and p.y/p.z
//     clamped to 1.3 times the half field of view; conic = cov2d^-1;
//   - the screen mean (fx p.x / p.z + cx, fy p.y / p.z + cy), a radius of
//     ceil(3 sqrt(largest eigenvalue)) pixels and the 16 x 16-pixel tiles it touches;
//   - colour max(0.5 + sum_k Y_k(d) sh_k, 0), d the unit direction from the camera to m;
//   - per pixel, front to back: alpha = min(0.99, sigmoid(logit) exp(-d^T conic d / 2)),
//     skipped below 1/255, C += colour alpha T, T *= 1 - alpha, stopping before a splat would
//     bring T below 1e-4; the pixel is C + T background.
// The backward passes are the exact derivatives of these (zero where alpha or a colour is
// clamped; the reference 3DGS holds a clamped Jacobian's depth term fixed, this does not).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define SPLAT_HD __host__ __device__ __forceinline__
#else
#define SPLAT_HD inline
#endif

namespace tensorf_kernels {

constexpr int SPLAT_TILE = 16;
constexpr float SPLAT_NEAR = 0.2f;
constexpr float SPLAT_DILATION = 0.3f;
constexpr float SPLAT_MAX_ALPHA = 0.99f;
constexpr float SPLAT_MIN_ALPHA = 1.0f / 255.0f;
constexpr float SPLAT_MIN_TRANSMITTANCE = 1e-4f;
constexpr float SPLAT_FOV_CLAMP = 1.3f;
constexpr double SPLAT_TILE_KEY = 4294967296.0;  // a sort key: tile * 2^32 + the depth's bits (< 2^52: exact)

constexpr float SH_C0 = 0.28209479177387814f;
constexpr float SH_C1 = 0.4886025119029199f;
constexpr float SH_C2_0 = 1.0925484305920792f, SH_C2_1 = -1.0925484305920792f, SH_C2_2 = 0.31539156525252005f,
                SH_C2_3 = -1.0925484305920792f, SH_C2_4 = 0.5462742152960396f;
constexpr float SH_C3_0 = -0.5900435899266435f, SH_C3_1 = 2.890611442640554f, SH_C3_2 = -0.4570457994644658f,
                SH_C3_3 = 0.3731763325901154f, SH_C3_4 = -0.4570457994644658f, SH_C3_5 = 1.445305721320277f,
                SH_C3_6 = -0.5900435899266435f;

// The camera as one float array: rotation R (row-major), translation t, fx, fy, cx, cy and the
// camera's centre in the world.
struct SplatCamera {
    float R[9];
    float t[3];
    float fx, fy, cx, cy;
    float centre[3];
    int width, height;
};

SPLAT_HD SplatCamera splat_camera(const float* values, int width, int height) {
    SplatCamera cam;
    for (int i = 0; i < 9; ++i) cam.R[i] = values[i];
    for (int i = 0; i < 3; ++i) cam.t[i] = values[9 + i];
    cam.fx = values[12]; cam.fy = values[13]; cam.cx = values[14]; cam.cy = values[15];
    for (int i = 0; i < 3; ++i) cam.centre[i] = values[16 + i];
    cam.width = width;
    cam.height = height;
    return cam;
}

SPLAT_HD int splat_clamp(int value, int low, int high) { return value < low ? low : (value > high ? high : value); }

SPLAT_HD int splat_tiles_x(int width) { return (width + SPLAT_TILE - 1) / SPLAT_TILE; }
SPLAT_HD int splat_tiles_y(int height) { return (height + SPLAT_TILE - 1) / SPLAT_TILE; }

// The basis Y[16] at unit direction (x, y, z) up to `degree`, and where `dY` is given its
// gradient dY[k][3] with respect to the direction.
SPLAT_HD void sh_basis(int degree, float x, float y, float z, float* Y, float (*dY)[3]) {
    Y[0] = SH_C0;
    if (dY) { dY[0][0] = dY[0][1] = dY[0][2] = 0.0f; }
    if (degree < 1) return;
    Y[1] = -SH_C1 * y; Y[2] = SH_C1 * z; Y[3] = -SH_C1 * x;
    if (dY) {
        dY[1][0] = 0.0f; dY[1][1] = -SH_C1; dY[1][2] = 0.0f;
        dY[2][0] = 0.0f; dY[2][1] = 0.0f; dY[2][2] = SH_C1;
        dY[3][0] = -SH_C1; dY[3][1] = 0.0f; dY[3][2] = 0.0f;
    }
    if (degree < 2) return;
    const float xx = x * x, yy = y * y, zz = z * z;
    Y[4] = SH_C2_0 * x * y;
    Y[5] = SH_C2_1 * y * z;
    Y[6] = SH_C2_2 * (2.0f * zz - xx - yy);
    Y[7] = SH_C2_3 * x * z;
    Y[8] = SH_C2_4 * (xx - yy);
    if (dY) {
        dY[4][0] = SH_C2_0 * y; dY[4][1] = SH_C2_0 * x; dY[4][2] = 0.0f;
        dY[5][0] = 0.0f; dY[5][1] = SH_C2_1 * z; dY[5][2] = SH_C2_1 * y;
        dY[6][0] = -2.0f * SH_C2_2 * x; dY[6][1] = -2.0f * SH_C2_2 * y; dY[6][2] = 4.0f * SH_C2_2 * z;
        dY[7][0] = SH_C2_3 * z; dY[7][1] = 0.0f; dY[7][2] = SH_C2_3 * x;
        dY[8][0] = 2.0f * SH_C2_4 * x; dY[8][1] = -2.0f * SH_C2_4 * y; dY[8][2] = 0.0f;
    }
    if (degree < 3) return;
    Y[9] = SH_C3_0 * y * (3.0f * xx - yy);
    Y[10] = SH_C3_1 * x * y * z;
    Y[11] = SH_C3_2 * y * (4.0f * zz - xx - yy);
    Y[12] = SH_C3_3 * z * (2.0f * zz - 3.0f * xx - 3.0f * yy);
    Y[13] = SH_C3_4 * x * (4.0f * zz - xx - yy);
    Y[14] = SH_C3_5 * z * (xx - yy);
    Y[15] = SH_C3_6 * x * (xx - 3.0f * yy);
    if (dY) {
        dY[9][0] = 6.0f * SH_C3_0 * x * y; dY[9][1] = SH_C3_0 * (3.0f * xx - 3.0f * yy); dY[9][2] = 0.0f;
        dY[10][0] = SH_C3_1 * y * z; dY[10][1] = SH_C3_1 * x * z; dY[10][2] = SH_C3_1 * x * y;
        dY[11][0] = -2.0f * SH_C3_2 * x * y; dY[11][1] = SH_C3_2 * (4.0f * zz - xx - 3.0f * yy);
        dY[11][2] = 8.0f * SH_C3_2 * y * z;
        dY[12][0] = -6.0f * SH_C3_3 * x * z; dY[12][1] = -6.0f * SH_C3_3 * y * z;
        dY[12][2] = SH_C3_3 * (6.0f * zz - 3.0f * xx - 3.0f * yy);
        dY[13][0] = SH_C3_4 * (4.0f * zz - 3.0f * xx - yy); dY[13][1] = -2.0f * SH_C3_4 * x * y;
        dY[13][2] = 8.0f * SH_C3_4 * x * z;
        dY[14][0] = 2.0f * SH_C3_5 * x * z; dY[14][1] = -2.0f * SH_C3_5 * y * z; dY[14][2] = SH_C3_5 * (xx - yy);
        dY[15][0] = SH_C3_6 * (3.0f * xx - 3.0f * yy); dY[15][1] = -6.0f * SH_C3_6 * x * y; dY[15][2] = 0.0f;
    }
}

// Rotation matrix (row-major) of the unit quaternion (w, x, y, z).
SPLAT_HD void quat_to_matrix(float w, float x, float y, float z, float* M) {
    M[0] = 1.0f - 2.0f * (y * y + z * z); M[1] = 2.0f * (x * y - w * z); M[2] = 2.0f * (x * z + w * y);
    M[3] = 2.0f * (x * y + w * z); M[4] = 1.0f - 2.0f * (x * x + z * z); M[5] = 2.0f * (y * z - w * x);
    M[6] = 2.0f * (x * z - w * y); M[7] = 2.0f * (y * z + w * x); M[8] = 1.0f - 2.0f * (x * x + y * y);
}

// Everything the projection of one splat computes, forward; kept to differentiate it.
struct SplatProjection {
    bool visible;
    float p[3];          // camera-space mean
    float q[4];          // unit quaternion
    float qnorm;         // the input quaternion's length
    float s[3];          // scales
    float Rq[9];         // its rotation
    float Sigma[6];      // world covariance (xx, xy, xz, yy, yz, zz)
    float T[6];          // J R, 2 x 3 row-major
    bool clamped_x, clamped_y;
    float tx, ty;        // the clamped camera-space x and y used in J
    float cov[3];        // 2D covariance (a, b, c) with the dilation
    float conic[3];      // its inverse (A, B, C)
    float u, v;          // screen mean
    int radius;
    int rect[4];         // tiles [x0, x1) x [y0, y1)
    float dir[3];        // unit camera-to-splat direction
    float dir_len;
    float raw_rgb[3];    // before the clamp at 0
    float rgb[3];
    float opacity;
};

SPLAT_HD void splat_project_one(const SplatCamera& cam, const float* mean, const float* log_scale,
                                const float* quat, float logit, const float* sh, int degree, SplatProjection& out) {
    out.visible = false;
    out.radius = 0;
    out.rect[0] = out.rect[1] = out.rect[2] = out.rect[3] = 0;
    const float* R = cam.R;
    for (int r = 0; r < 3; ++r) {
        out.p[r] = R[3 * r] * mean[0] + R[3 * r + 1] * mean[1] + R[3 * r + 2] * mean[2] + cam.t[r];
    }
    if (!(out.p[2] > SPLAT_NEAR)) return;
    out.qnorm = sqrtf(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]);
    if (!(out.qnorm > 0.0f)) return;
    for (int i = 0; i < 4; ++i) out.q[i] = quat[i] / out.qnorm;
    quat_to_matrix(out.q[0], out.q[1], out.q[2], out.q[3], out.Rq);
    for (int i = 0; i < 3; ++i) out.s[i] = expf(log_scale[i]);
    float M[9];  // Rq diag(s)
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) M[3 * r + c] = out.Rq[3 * r + c] * out.s[c];
    float S[9];
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) S[3 * r + c] = M[3 * r] * M[3 * c] + M[3 * r + 1] * M[3 * c + 1] + M[3 * r + 2] * M[3 * c + 2];
    out.Sigma[0] = S[0]; out.Sigma[1] = S[1]; out.Sigma[2] = S[2];
    out.Sigma[3] = S[4]; out.Sigma[4] = S[5]; out.Sigma[5] = S[8];

    const float z = out.p[2];
    const float lim_x = SPLAT_FOV_CLAMP * 0.5f * (float)cam.width / cam.fx;
    const float lim_y = SPLAT_FOV_CLAMP * 0.5f * (float)cam.height / cam.fy;
    const float xz = out.p[0] / z, yz = out.p[1] / z;
    out.clamped_x = xz < -lim_x || xz > lim_x;
    out.clamped_y = yz < -lim_y || yz > lim_y;
    out.tx = fminf(lim_x, fmaxf(-lim_x, xz)) * z;
    out.ty = fminf(lim_y, fmaxf(-lim_y, yz)) * z;
    const float J00 = cam.fx / z, J02 = -cam.fx * out.tx / (z * z);
    const float J11 = cam.fy / z, J12 = -cam.fy * out.ty / (z * z);
    for (int c = 0; c < 3; ++c) {
        out.T[c] = J00 * R[c] + J02 * R[6 + c];
        out.T[3 + c] = J11 * R[3 + c] + J12 * R[6 + c];
    }
    float TS[6];  // T Sigma, 2 x 3
    for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 3; ++c)
            TS[3 * r + c] = out.T[3 * r] * S[c] + out.T[3 * r + 1] * S[3 + c] + out.T[3 * r + 2] * S[6 + c];
    out.cov[0] = TS[0] * out.T[0] + TS[1] * out.T[1] + TS[2] * out.T[2] + SPLAT_DILATION;
    out.cov[1] = TS[0] * out.T[3] + TS[1] * out.T[4] + TS[2] * out.T[5];
    out.cov[2] = TS[3] * out.T[3] + TS[4] * out.T[4] + TS[5] * out.T[5] + SPLAT_DILATION;
    const float det = out.cov[0] * out.cov[2] - out.cov[1] * out.cov[1];
    if (!(det > 0.0f)) return;
    out.conic[0] = out.cov[2] / det;
    out.conic[1] = -out.cov[1] / det;
    out.conic[2] = out.cov[0] / det;
    const float mid = 0.5f * (out.cov[0] + out.cov[2]);
    const float spread = sqrtf(fmaxf(0.1f, mid * mid - det));
    out.radius = (int)ceilf(3.0f * sqrtf(fmaxf(mid + spread, mid - spread)));
    out.u = cam.fx * out.p[0] / z + cam.cx;
    out.v = cam.fy * out.p[1] / z + cam.cy;
    const float px = out.u - 0.5f, py = out.v - 0.5f;  // in the reference's pixel-centre coordinates
    const int gx = splat_tiles_x(cam.width), gy = splat_tiles_y(cam.height);
    const float r = (float)out.radius;
    out.rect[0] = splat_clamp((int)((px - r) / SPLAT_TILE), 0, gx);
    out.rect[1] = splat_clamp((int)((px + r + SPLAT_TILE - 1) / SPLAT_TILE), 0, gx);
    out.rect[2] = splat_clamp((int)((py - r) / SPLAT_TILE), 0, gy);
    out.rect[3] = splat_clamp((int)((py + r + SPLAT_TILE - 1) / SPLAT_TILE), 0, gy);
    if ((out.rect[1] - out.rect[0]) * (out.rect[3] - out.rect[2]) == 0) {
        out.radius = 0;
        return;
    }
    float d[3] = {mean[0] - cam.centre[0], mean[1] - cam.centre[1], mean[2] - cam.centre[2]};
    out.dir_len = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    for (int i = 0; i < 3; ++i) out.dir[i] = d[i] / out.dir_len;
    float Y[16];
    sh_basis(degree, out.dir[0], out.dir[1], out.dir[2], Y, nullptr);
    const int K = (degree + 1) * (degree + 1);
    for (int c = 0; c < 3; ++c) {
        float value = 0.5f;
        for (int k = 0; k < K; ++k) value += Y[k] * sh[3 * k + c];
        out.raw_rgb[c] = value;
        out.rgb[c] = fmaxf(value, 0.0f);
    }
    out.opacity = 1.0f / (1.0f + expf(-logit));
    out.visible = true;
}

// Gradients of one splat's parameters from those of its projection's outputs.
SPLAT_HD void splat_project_one_backward(const SplatCamera& cam, const float* mean, const float* sh, int degree,
                                         const SplatProjection& f, const float* g_uv, const float* g_conic,
                                         const float* g_rgb, float g_opacity, float* g_mean, float* g_log_scale,
                                         float* g_quat, float* g_sh, float* g_logit) {
    const int K = (degree + 1) * (degree + 1);
    for (int i = 0; i < 3; ++i) g_mean[i] = g_log_scale[i] = 0.0f;
    for (int i = 0; i < 4; ++i) g_quat[i] = 0.0f;
    for (int i = 0; i < 3 * K; ++i) g_sh[i] = 0.0f;
    *g_logit = 0.0f;
    if (!f.visible) return;
    *g_logit = g_opacity * f.opacity * (1.0f - f.opacity);

    // colour: through the coefficients and the direction
    float Y[16], dY[16][3];
    sh_basis(degree, f.dir[0], f.dir[1], f.dir[2], Y, dY);
    float g_col[3];
    for (int c = 0; c < 3; ++c) g_col[c] = f.raw_rgb[c] < 0.0f ? 0.0f : g_rgb[c];
    float g_dir[3] = {0.0f, 0.0f, 0.0f};
    for (int k = 0; k < K; ++k) {
        float weight = 0.0f;
        for (int c = 0; c < 3; ++c) {
            g_sh[3 * k + c] = Y[k] * g_col[c];
            weight += sh[3 * k + c] * g_col[c];
        }
        for (int a = 0; a < 3; ++a) g_dir[a] += dY[k][a] * weight;
    }
    const float along = g_dir[0] * f.dir[0] + g_dir[1] * f.dir[1] + g_dir[2] * f.dir[2];
    for (int a = 0; a < 3; ++a) g_mean[a] += (g_dir[a] - f.dir[a] * along) / f.dir_len;

    // screen mean
    const float z = f.p[2];
    float g_p[3] = {g_uv[0] * cam.fx / z, g_uv[1] * cam.fy / z,
                    -g_uv[0] * cam.fx * f.p[0] / (z * z) - g_uv[1] * cam.fy * f.p[1] / (z * z)};

    // conic -> 2D covariance
    const float a = f.cov[0], b = f.cov[1], c = f.cov[2];
    const float det = a * c - b * b;
    const float inv2 = 1.0f / (det * det);
    const float gA = g_conic[0], gB = g_conic[1], gC = g_conic[2];
    const float ga = (-c * c * gA + b * c * gB - b * b * gC) * inv2;
    const float gb = (2.0f * b * c * gA - (a * c + b * b) * gB + 2.0f * a * b * gC) * inv2;
    const float gc = (-b * b * gA + a * b * gB - a * a * gC) * inv2;
    const float G2[4] = {ga, 0.5f * gb, 0.5f * gb, gc};

    // 2D covariance = T Sigma T^T
    float S[9] = {f.Sigma[0], f.Sigma[1], f.Sigma[2], f.Sigma[1], f.Sigma[3], f.Sigma[4], f.Sigma[2], f.Sigma[4],
                  f.Sigma[5]};
    float TS[6];
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 3; ++k) TS[3 * r + k] = f.T[3 * r] * S[k] + f.T[3 * r + 1] * S[3 + k] + f.T[3 * r + 2] * S[6 + k];
    float gT[6];  // 2 G2 T Sigma
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 3; ++k) gT[3 * r + k] = 2.0f * (G2[2 * r] * TS[k] + G2[2 * r + 1] * TS[3 + k]);
    float gS[9];  // T^T G2 T
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            gS[3 * i + j] = f.T[i] * (G2[0] * f.T[j] + G2[1] * f.T[3 + j]) + f.T[3 + i] * (G2[2] * f.T[j] + G2[3] * f.T[3 + j]);

    // T = J R: the Jacobian's entries, then the camera-space mean
    const float* R = cam.R;
    float gJ[6];
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 3; ++k) gJ[3 * r + k] = gT[3 * r] * R[3 * k] + gT[3 * r + 1] * R[3 * k + 1] + gT[3 * r + 2] * R[3 * k + 2];
    const float z2 = z * z, z3 = z2 * z;
    // J02 = -fx tx / z^2 with tx = x, or clamped: tx = +-lim z (then J02 = -+fx lim / z)
    g_p[2] += -cam.fx / z2 * gJ[0] - cam.fy / z2 * gJ[4] + (f.clamped_x ? 1.0f : 2.0f) * cam.fx * f.tx / z3 * gJ[2]
              + (f.clamped_y ? 1.0f : 2.0f) * cam.fy * f.ty / z3 * gJ[5];
    if (!f.clamped_x) g_p[0] += -cam.fx / z2 * gJ[2];
    if (!f.clamped_y) g_p[1] += -cam.fy / z2 * gJ[5];
    for (int a2 = 0; a2 < 3; ++a2) g_mean[a2] += R[a2] * g_p[0] + R[3 + a2] * g_p[1] + R[6 + a2] * g_p[2];

    // Sigma = M M^T, M = Rq diag(s)
    float gM[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            float sum = 0.0f;
            for (int k = 0; k < 3; ++k) sum += (gS[3 * i + k] + gS[3 * k + i]) * f.Rq[3 * k + j] * f.s[j];
            gM[3 * i + j] = sum;
        }
    float gR[9];
    for (int j = 0; j < 3; ++j) {
        float g_s = 0.0f;
        for (int i = 0; i < 3; ++i) {
            g_s += gM[3 * i + j] * f.Rq[3 * i + j];
            gR[3 * i + j] = gM[3 * i + j] * f.s[j];
        }
        g_log_scale[j] = g_s * f.s[j];
    }
    const float w = f.q[0], x = f.q[1], y = f.q[2], zq = f.q[3];
    float gq[4];
    gq[0] = 2.0f * (-zq * gR[1] + y * gR[2] + zq * gR[3] - x * gR[5] - y * gR[6] + x * gR[7]);
    gq[1] = 2.0f * (y * gR[1] + zq * gR[2] + y * gR[3] - 2.0f * x * gR[4] - w * gR[5] + zq * gR[6] + w * gR[7] - 2.0f * x * gR[8]);
    gq[2] = 2.0f * (-2.0f * y * gR[0] + x * gR[1] + w * gR[2] + x * gR[3] + zq * gR[5] - w * gR[6] + zq * gR[7] - 2.0f * y * gR[8]);
    gq[3] = 2.0f * (-2.0f * zq * gR[0] - w * gR[1] + x * gR[2] + w * gR[3] - 2.0f * zq * gR[4] + y * gR[5] + x * gR[6] + y * gR[7]);
    const float dot = gq[0] * w + gq[1] * x + gq[2] * y + gq[3] * zq;
    for (int i = 0; i < 4; ++i) g_quat[i] = (gq[i] - f.q[i] * dot) / f.qnorm;
}

// One pixel's weight of splat g: its Gaussian's value G and alpha, or false where it adds nothing.
SPLAT_HD bool splat_alpha(const float* uv, const float* conic, const float* opacity, int g, float px, float py,
                          float& dx, float& dy, float& G, float& alpha, bool& clamped) {
    dx = uv[2 * g] - px;
    dy = uv[2 * g + 1] - py;
    const float* con = conic + 3 * g;
    const float power = -0.5f * (con[0] * dx * dx + con[2] * dy * dy) - con[1] * dx * dy;
    if (power > 0.0f) return false;
    G = expf(power);
    const float raw = opacity[g] * G;
    clamped = raw > SPLAT_MAX_ALPHA;
    alpha = clamped ? SPLAT_MAX_ALPHA : raw;
    return alpha >= SPLAT_MIN_ALPHA;
}

// The order key of splat g in tile `tile`: tiles in order, then depth (positive floats order as
// their bits do).
SPLAT_HD double splat_sort_key(int tile, float depth) {
    uint32_t bits;
    memcpy(&bits, &depth, sizeof(bits));
    return (double)tile * SPLAT_TILE_KEY + (double)bits;
}

SPLAT_HD int splat_key_tile(double key) { return (int)(key / SPLAT_TILE_KEY); }

}  // namespace tensorf_kernels
