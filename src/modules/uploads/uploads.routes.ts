import type Router from '@koa/router';
import { notFound } from '../../http/errors';
import { multipartFile, withUploadedFile } from '../../http/multipart';
import type { Guards } from '../../http/guards';
import { type ImageStore, storedImage, storeImage } from './uploads.service';

export function uploadRoutes(router: Router, g: Guards, deps: { store: ImageStore; publicUrl: string; maxBytes: number }): void {
  const imageUpload = multipartFile(deps.maxBytes, `The image is larger than ${deps.maxBytes / 2 ** 20} MB`);

  /** multipart, the image in field `image`: 201 `{ id, url, contentType, size }`. */
  router.post('/uploads/image', g.secret, imageUpload, async (ctx) => {
    const stored = await withUploadedFile(ctx, 'image', 'An image', (file) =>
      storeImage(deps.store, { publicUrl: deps.publicUrl, projectId: ctx.state.project!.id, tmpPath: file.filepath, size: file.size }),
    );
    ctx.status = 201;
    ctx.body = stored;
  });

  // Public, as images in sent mail must be: only names the service gave, with their own type.
  router.get('/uploads/:projectId/:name', async (ctx) => {
    const found = await storedImage(deps.store, ctx.params.projectId, ctx.params.name);
    if (!found) throw notFound('Upload');
    ctx.set('Content-Type', found.type);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Content-Security-Policy', "default-src 'none'");
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.body = found.body;
  });
}
