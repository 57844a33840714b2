/** Response metadata (gRPC trailers / Connect error metadata) naming a watch's resume position; CORS exposes them. */
export const RESUME_SEQUENCE_HEADER = 'bedrock-resume-sequence';
export const RESUME_DELTA_HEADER = 'bedrock-resume-delta-index';
