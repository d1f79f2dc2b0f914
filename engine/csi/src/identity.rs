//! The Identity service: the driver's name and version, no plugin capabilities (a node
//! plugin only: no controller, nothing to attach), and a probe that is ready once the
//! plugin serves.

use tonic::{Request, Response, Status};

use crate::proto::identity_server::Identity;
use crate::proto::*;

pub(crate) struct IdentityService;

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: crate::mounter::DRIVER_NAME.to_string(),
            vendor_version: env!("CARGO_PKG_VERSION").to_string(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: Vec::new(),
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        // Adoption runs before the socket is bound: answering at all means ready.
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}
