import crypto from 'node:crypto';
import { signS3Request } from '../../src/modules/uploads/s3';

test('signs the GET Object example of the S3 SigV4 documentation to its published signature', () => {
  const headers = signS3Request(
    {
      method: 'GET',
      url: new URL('https://examplebucket.s3.amazonaws.com/test.txt'),
      headers: { Range: 'bytes=0-9' },
      payloadHash: crypto.createHash('sha256').update('').digest('hex'),
    },
    { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', region: 'us-east-1' },
    new Date('2013-05-24T00:00:00Z'),
  );
  expect(headers.authorization).toBe(
    'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,' +
      'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,' +
      'Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
  );
  expect(headers['x-amz-date']).toBe('20130524T000000Z');
});
