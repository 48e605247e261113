import fs from 'node:fs';
import type Router from '@koa/router';
import type { File } from 'formidable';
import { koaBody } from 'koa-body';
import { AppError, notFound, simpleBadRequest } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { storedImage, storeImage } from './uploads.service';

export function uploadRoutes(router: Router, g: Guards, deps: { dataDir: string; publicUrl: string; maxBytes: number }): void {
  const imageUpload = koaBody({
    multipart: true,
    json: false,
    urlencoded: false,
    text: false,
    formidable: { maxFileSize: deps.maxBytes, maxTotalFileSize: deps.maxBytes, maxFiles: 1 },
    onError: (err) => {
      if ((err as { httpCode?: number }).httpCode === 413) {
        throw new AppError(413, 'PAYLOAD_TOO_LARGE', `The image is larger than ${deps.maxBytes / 2 ** 20} MB`);
      }
      throw simpleBadRequest(`Invalid multipart body: ${err.message}`);
    },
  });

  /** multipart, the image in field `image`: 201 `{ id, url, contentType, size }`. */
  router.post('/uploads/image', g.secret, imageUpload, async (ctx) => {
    const field = ctx.request.files?.image;
    const file = (Array.isArray(field) ? field[0] : field) as File | undefined;
    try {
      if (!file) {
        throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
          errors: [{ field: 'image', message: 'An image is required in the multipart field "image"', code: 'invalid_type' }],
        });
      }
      ctx.status = 201;
      ctx.body = await storeImage({ dataDir: deps.dataDir, publicUrl: deps.publicUrl, projectId: ctx.state.project!.id, tmpPath: file.filepath, size: file.size });
    } finally {
      if (file) await fs.promises.rm(file.filepath, { force: true });
    }
  });

  // Public, as images in sent mail must be: only names the service gave, with their own type.
  router.get('/uploads/:projectId/:name', async (ctx) => {
    const found = storedImage(deps.dataDir, ctx.params.projectId, ctx.params.name);
    if (!found) throw notFound('Upload');
    ctx.set('Content-Type', found.type);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Content-Security-Policy', "default-src 'none'");
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.body = fs.createReadStream(found.path);
  });
}
