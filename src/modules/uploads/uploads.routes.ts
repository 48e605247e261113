import type Router from '@koa/router';
import { content, endpoint, simpleError } from '../../http/endpoint';
import { notFound } from '../../errors';
import { multipartFile, withUploadedFile } from '../../http/multipart';
import type { Guards } from '../../http/guards';
import { storedImageParams, storedImageResponse } from './uploads.schemas';
import { type ImageStore, storedImage, storeImage } from './uploads.service';

export function uploadRoutes(router: Router, g: Guards, deps: { store: ImageStore; publicUrl: string; maxBytes: number }): void {
  const limit = `${deps.maxBytes / 2 ** 20} MB`;
  const imageUpload = multipartFile(deps.maxBytes, `The image is larger than ${limit}`);

  router.post(
    '/uploads/image',
    g.secret,
    imageUpload,
    endpoint(
      {
        tag: 'Uploads',
        summary: 'Upload an image for template bodies',
        upload: { field: 'image', description: `A PNG, JPEG, GIF or WebP image, at most ${limit} (SVG is refused)` },
        responses: { 201: storedImageResponse.describe('The stored image and its public URL') },
        errors: {
          400: simpleError('Not a multipart body'),
          413: `The image is larger than ${limit}`,
          415: 'Not a PNG, JPEG, GIF or WebP image',
          422: 'No file in the field `image`',
        },
      },
      async (ctx) => {
        const stored = await withUploadedFile(ctx, 'image', 'An image', (file) =>
          storeImage(deps.store, { publicUrl: deps.publicUrl, projectId: ctx.state.project!.id, tmpPath: file.filepath, size: file.size }),
        );
        ctx.status = 201;
        ctx.body = stored;
      },
    ),
  );

  // Public, as images in sent mail must be: only names the service gave, with their own type.
  router.get(
    '/uploads/:projectId/:name',
    endpoint(
      {
        tag: 'Uploads',
        summary: 'An uploaded image (public, for mail clients)',
        params: storedImageParams,
        responses: { 200: content('image/*', 'The image, cached for a year') },
        errors: { 404: 'No such image' },
      },
      async (ctx, input) => {
        const found = await storedImage(deps.store, input.param('projectId'), input.param('name'));
        if (!found) throw notFound('Upload');
        ctx.set('Content-Type', found.type);
        ctx.set('X-Content-Type-Options', 'nosniff');
        ctx.set('Content-Security-Policy', "default-src 'none'");
        ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
        ctx.body = found.body;
      },
    ),
  );
}
