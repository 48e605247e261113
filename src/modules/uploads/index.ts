/** The uploads module's public surface: the only file other modules import. */
export { S3Bucket } from './s3';
export { uploadRoutes } from './uploads.routes';
